/* `flamecol query`: the store's answers (findings, folded, pprof) in a terminal. */
#ifndef FC_QUERY_CLI_H
#define FC_QUERY_CLI_H

int fc_cmd_query(int argc, char **argv);

#endif
