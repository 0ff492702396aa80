/*
 * A sample's span: its OTLP Link, else its pprof labels span_id / trace_id
 * in the forms Pyroscope's span-profile integrations send (span_id as 16 hex
 * digits or decimal, trace_id as 32 hex digits or a 64-bit id). The one
 * reader of span ids: the store's span index and the spanlink processor.
 */
#ifndef FC_CORE_SPAN_H
#define FC_CORE_SPAN_H

#include "core/batch.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A span id as a label value: exactly 16 hex digits (either case), else a
 * decimal unsigned 64-bit number (1-20 digits; some integrations send span
 * ids as decimal), big-endian into out. A 16-character string of digits
 * only is read as hex. The zero id (OTLP's "no span") is refused.
 */
bool fc_span_id_parse(const char *s, size_t len, uint8_t out[8]);
/*
 * A trace id as a label value: 32 hex digits; or a 64-bit id (16 hex digits
 * or decimal, as fc_span_id_parse) in the low 8 bytes, the high ones zero.
 * The zero id is refused.
 */
bool fc_trace_id_parse(const char *s, size_t len, uint8_t out[16]);
/* The same for a label of any kind: a string, or a pprof number label (span ids only). */
bool fc_span_id_attr(const struct fc_batch *b, const struct fc_attr *a, uint8_t out[8]);
bool fc_trace_id_attr(const struct fc_batch *b, const struct fc_attr *a, uint8_t out[16]);

/*
 * The span (and trace, zero when unknown) of a sample: its Link, else its
 * labels span_id / trace_id. False when it has none (or a zero span id).
 */
bool fc_sample_span(const struct fc_batch *b, const struct fc_sample *s, uint8_t span[8],
                    uint8_t trace[16]);

/* True when the n bytes of an id are all zero (OTLP's "no id"). */
bool fc_id_is_zero(const uint8_t *p, size_t n);

#endif
