/* The built-in config `flamecol` runs without --config (see print-config --default). */
#ifndef FC_DEFAULT_CONFIG_H
#define FC_DEFAULT_CONFIG_H

extern const char fc_default_config[];

#endif
