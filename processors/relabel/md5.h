/* MD5 (RFC 1321): hashmod must give Prometheus' shard numbers, so it hashes as Prometheus does. */
#ifndef FC_PROCESSORS_RELABEL_MD5_H
#define FC_PROCESSORS_RELABEL_MD5_H

#include <stddef.h>
#include <stdint.h>

void fc_md5(const void *p, size_t n, uint8_t out[16]);

#endif
