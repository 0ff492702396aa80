#ifndef FC_VERSION_H
#define FC_VERSION_H

#define FC_VERSION "0.1.0"

#endif
