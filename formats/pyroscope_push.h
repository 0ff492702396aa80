/*
 * What the pyroscope exporter sends, as Pyroscope's SDKs and Alloy's
 * pyroscope.write send it:
 *
 *   push:   POST /push.v1.PusherService/Push (Connect, application/proto), a
 *           PushRequest{series=1} of RawProfileSeries{labels=1, samples=2},
 *           LabelPair{name=1, value=2}, RawSample{raw_profile=1, ID=2}.
 *   ingest: POST /ingest?name=<service_name>{k=v,...}&from=&until=&format=pprof
 *           with the gzipped pprof as the raw body.
 *
 * The profile travels as a gzipped pprof (fc_pprof_encode: sample labels stay
 * pprof labels, a span link becomes the span_id / trace_id labels), its
 * sample types and values as flamecol received them, but one: over push, an
 * OTLP profile of samples:count with a cpu:nanoseconds period that carried
 * no __name__ goes as cpu:nanoseconds, values x period, with its __name__
 * process_cpu, as Pyroscope's OTLP ingest (and flamecol's store,
 * fc_pyro_stored_type) keeps it. Over ingest it goes as samples:count: the
 * server names profiles from their sample types there, and a cpu:nanoseconds
 * one would land in the same profile type as the source's own cpu profile.
 *
 * Series labels:
 *   push:   every series label, except the reserved `__*` ones other than
 *           `__name__` and `__delta__` (Alloy's pyroscope.write drops them).
 *   ingest: service_name is the application name (`unknown_service` when the
 *           profile has none), pyroscope_spy goes as spyName, the other
 *           labels go inside {...} except `__*` ones (Pyroscope's own), but
 *           `__session_id__`. `__name__` cannot travel there: the server
 *           derives it from the sample types (fc_pyro_profile_name), which
 *           may name the profile otherwise than it was named (by an OTLP
 *           client, or a sample_type_config); push keeps it.
 *           What the name syntax cannot carry (fc_pyro_parse_name, which
 *           checks it: keys of [A-Za-z0-9_.], no ',' or '}' in a value, no
 *           surrounding spaces, an application name of [A-Za-z0-9_.-/]) is
 *           refused: FC_EPROTO with a message naming the label. The batch is
 *           then not sent at all (the receiver answers 400 and counts it
 *           refused; the exporter counts its samples as
 *           send_failed{error_type="unrepresentable"}): a forwarder must not
 *           merge or rename series silently. Push carries every label.
 */
#ifndef FC_FORMATS_PYROSCOPE_PUSH_H
#define FC_FORMATS_PYROSCOPE_PUSH_H

#include "core/batch.h"
#include "core/buf.h"
#include "core/err.h"

#include <stdbool.h>
#include <stdint.h>

#define FC_PYRO_PUSH_PATH "/push.v1.PusherService/Push"

/* True when a series label of this name goes into a PushRequest. */
bool fc_pyro_push_label_kept(const char *name);

/*
 * Appends the gzipped pprof of profile p; as_stored: converted as above
 * (push), else exactly as received (ingest).
 */
int fc_pyro_raw_profile(const struct fc_batch *b, const struct fc_profile *p, bool as_stored,
                        struct fc_buf *out, struct fc_error *err);

/*
 * Appends a PushRequest holding profiles [first, first + n) of b, one
 * RawProfileSeries each with one RawSample: the gzipped pprof and an ID (the
 * profile's OTLP profile_id as a UUID, else a random version 4 UUID).
 */
int fc_pyro_push_encode(const struct fc_batch *b, uint32_t first, uint32_t n, struct fc_buf *out,
                        struct fc_error *err);

/*
 * Appends "/ingest?name=...&from=<unix s>&until=<unix s>&format=pprof[&spyName=...]"
 * for profile p (from = time_ns, until = time_ns + duration_ns, both floored
 * to seconds; neither when the time is unknown), every value percent-encoded.
 * FC_EPROTO when a label cannot travel in `name` (see above).
 */
int fc_pyro_ingest_target(const struct fc_batch *b, const struct fc_profile *p, struct fc_buf *out,
                          struct fc_error *err);

#endif
