/*
 * The `window` part of the downsample processor: profiles of one series
 * (tenant, series labels, sample types, period type and period) whose time
 * falls in one window (aligned to multiples of the window since the epoch)
 * are merged into one profile: the dictionaries are interned into one
 * (fc_batch_merge_profiles), the samples appended, and samples with the same
 * stack, sample labels and link (values only, no timestamps) summed. The
 * merged profile starts at its earliest input and lasts to the end of its
 * latest one, so a store files it in the same windows (of the window's size
 * or larger multiples of it) as its inputs.
 *
 * A request is answered as soon as its profiles are in the buffer (and, with
 * storage, synced to disk). A window is emitted (fc_processor_next, from the
 * processor's own thread) when
 *   - the wall clock passes its end plus a quarter window (live data), or,
 *     for a window that was already over when it opened (old timestamps),
 *     one window and a quarter after it opened;
 *   - a profile of the same series arrives for a later window;
 *   - at shutdown (every open window, within half the shutdown grace).
 * A profile for a window that is already emitted opens a window of its own.
 * Due windows of one tenant are sent together, up to 1024 (about 16 MiB) in
 * one batch.
 * A retryable refusal downstream keeps the window and retries (1 s doubling
 * to 30 s); a permanent one drops it (its samples counted as dropped).
 *
 * storage: every request is encoded (OTLP protobuf) and appended to the
 * persistent queue of the network exporters (exporters/helper/persist.h)
 * before it is answered; a record is acked done once every window holding
 * its profiles was accepted downstream (or dropped for good). On start the
 * records not done are replayed into the buffer. Without storage a crash
 * loses what is buffered (up to one window and a quarter).
 */
#ifndef FC_DOWNSAMPLE_WINDOW_H
#define FC_DOWNSAMPLE_WINDOW_H

#include "core/batch.h"
#include "core/component.h"
#include "core/err.h"

#include <stdint.h>

struct fc_dswin_options {
    int64_t window_ns;
    const char *storage; /* NULL or "" = in memory */
    int64_t max_buffer_bytes;
};

struct fc_dswin;

int fc_dswin_create(struct fc_processor *self, const struct fc_dswin_options *o,
                    struct fc_dswin **out, struct fc_error *err);
/* Opens storage (replaying it) and starts the emitting thread. */
int fc_dswin_start(struct fc_dswin *w, const struct fc_host *host, struct fc_error *err);
/*
 * Buffers every profile of b (borrowed; profiles with no time get the
 * current one). FC_EAGAIN when the buffer is full, FC_EUNAVAIL when stopping.
 */
int fc_dswin_add(struct fc_dswin *w, struct fc_batch *b, struct fc_error *err);
/* Emits every window (within half the shutdown grace) and stops the thread. */
void fc_dswin_shutdown(struct fc_dswin *w);
void fc_dswin_destroy(struct fc_dswin *w);

/*
 * Merges profile `profile` of src into acc (a batch of at most one profile,
 * same tenant): the first one is copied, later ones are added as described
 * above. *merged (may be NULL) gets the samples that were summed into an
 * equal one. On error acc is unchanged but for unused dictionary rows.
 */
int fc_dswin_merge(struct fc_batch *acc, const struct fc_batch *src, uint32_t profile,
                   uint64_t *merged, struct fc_error *err);

#endif
