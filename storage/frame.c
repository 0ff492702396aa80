#include "storage/frame.h"

#include "core/err.h"
#include "formats/pb.h"

#include <inttypes.h>
#include <string.h>

static struct fc_frame_str str_of(const struct fc_batch *b, uint32_t i)
{
    struct fc_frame_str s = {fc_str(b, i), b->dict.str_len[i]};
    return s;
}

void fc_frame_of(const struct fc_batch *b, const struct fc_location *loc, uint32_t j,
                 struct fc_frame *out)
{
    memset(out, 0, sizeof(*out));
    if (loc->n_lines > 0) {
        const struct fc_line *line = &b->dict.lines[loc->lines_off + j];
        const struct fc_function *fn = &b->dict.functions[line->function];
        out->name = str_of(b, fn->name);
        out->system_name = str_of(b, fn->system_name);
        out->file = str_of(b, fn->filename);
        out->start_line = fn->start_line;
        out->line = line->line;
        out->column = line->column;
        out->is_inline = j + 1 < loc->n_lines;
    }
    if (out->name.n == 0) {
        /* Unsymbolized: named by its address (fc_frame_name), kept with its mapping. */
        out->has_address = true;
        out->address = loc->address;
        if (loc->mapping != 0) {
            const struct fc_mapping *m = &b->dict.mappings[loc->mapping];
            out->has_mapping = true;
            out->mapping.file = str_of(b, m->filename);
            out->mapping.build_id = str_of(b, m->build_id);
            out->mapping.start = m->memory_start;
            out->mapping.limit = m->memory_limit;
            out->mapping.offset = m->file_offset;
            out->mapping.flags = m->flags;
        }
    }
}

static bool str_eq(struct fc_frame_str a, struct fc_frame_str b)
{
    return a.n == b.n && (a.n == 0 || memcmp(a.p, b.p, a.n) == 0);
}

static uint64_t zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzigzag(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static void put_str(struct fc_buf *out, struct fc_frame_str s)
{
    fc_pb_put_varint(out, s.n);
    fc_buf_append(out, s.p, s.n);
}

void fc_frame_encode(const struct fc_frame *f, struct fc_buf *out)
{
    uint32_t flags = 0;
    static const uint8_t head[2] = {0, FC_FRAME_VERSION};

    if (f->is_inline) {
        flags |= FC_FR_INLINE;
    }
    if (f->system_name.n > 0) {
        flags |= str_eq(f->system_name, f->name) ? FC_FR_SYSTEM_SAME : FC_FR_SYSTEM;
    }
    flags |= f->file.n > 0 ? FC_FR_FILE : 0;
    flags |= f->start_line != 0 ? FC_FR_START : 0;
    flags |= f->line != 0 ? FC_FR_LINE : 0;
    flags |= f->column != 0 ? FC_FR_COLUMN : 0;
    flags |= f->has_address ? FC_FR_ADDRESS : 0;
    flags |= f->has_address && f->has_mapping ? FC_FR_MAPPING : 0;
    if (flags == 0 && f->name.n > 0 && f->name.p[0] != '\0') {
        fc_buf_append(out, f->name.p, f->name.n); /* only a name: the plain form */
        return;
    }
    fc_buf_append(out, head, sizeof(head));
    fc_pb_put_varint(out, flags);
    put_str(out, f->name);
    if (flags & FC_FR_SYSTEM) {
        put_str(out, f->system_name);
    }
    if (flags & FC_FR_FILE) {
        put_str(out, f->file);
    }
    if (flags & FC_FR_START) {
        fc_pb_put_varint(out, zigzag(f->start_line));
    }
    if (flags & FC_FR_LINE) {
        fc_pb_put_varint(out, zigzag(f->line));
    }
    if (flags & FC_FR_COLUMN) {
        fc_pb_put_varint(out, zigzag(f->column));
    }
    if (flags & FC_FR_ADDRESS) {
        fc_pb_put_varint(out, f->address);
    }
    if (flags & FC_FR_MAPPING) {
        fc_pb_put_varint(out, f->mapping.flags);
        put_str(out, f->mapping.file);
        put_str(out, f->mapping.build_id);
        fc_pb_put_varint(out, f->mapping.start);
        fc_pb_put_varint(out, f->mapping.limit);
        fc_pb_put_varint(out, f->mapping.offset);
    }
}

static bool get_str(struct fc_pb *r, struct fc_frame_str *s)
{
    uint64_t n;

    if (fc_pb_varint(r, &n) != 0 || n > (uint64_t)(r->end - r->p)) {
        return false;
    }
    s->p = (const char *)r->p;
    s->n = (size_t)n;
    r->p += n;
    return true;
}

static bool get_line(struct fc_pb *r, uint32_t flags, uint32_t bit, int64_t *v)
{
    uint64_t x;

    if (!(flags & bit)) {
        return true;
    }
    if (fc_pb_varint(r, &x) != 0) {
        return false;
    }
    *v = unzigzag(x);
    return true;
}

int fc_frame_decode(const uint8_t *p, size_t n, struct fc_frame *out)
{
    struct fc_pb r;
    uint64_t flags, v;
    bool ok;

    memset(out, 0, sizeof(*out));
    if (n == 0 || p[0] != 0) {
        out->name.p = (const char *)p; /* a plain name */
        out->name.n = n;
        return FC_OK;
    }
    if (n < 2 || p[1] != FC_FRAME_VERSION) {
        return FC_EPROTO;
    }
    fc_pb_init(&r, p + 2, n - 2);
    if (fc_pb_varint(&r, &flags) != 0 || (flags & ~(uint64_t)FC_FR_ALL) != 0 ||
        ((flags & FC_FR_SYSTEM) && (flags & FC_FR_SYSTEM_SAME)) ||
        ((flags & FC_FR_MAPPING) && !(flags & FC_FR_ADDRESS))) {
        return FC_EPROTO;
    }
    out->is_inline = (flags & FC_FR_INLINE) != 0;
    ok = get_str(&r, &out->name);
    if (ok && (flags & FC_FR_SYSTEM)) {
        ok = get_str(&r, &out->system_name);
    }
    if (flags & FC_FR_SYSTEM_SAME) {
        out->system_name = out->name;
    }
    if (ok && (flags & FC_FR_FILE)) {
        ok = get_str(&r, &out->file);
    }
    ok = ok && get_line(&r, (uint32_t)flags, FC_FR_START, &out->start_line) &&
         get_line(&r, (uint32_t)flags, FC_FR_LINE, &out->line) &&
         get_line(&r, (uint32_t)flags, FC_FR_COLUMN, &out->column);
    if (ok && (flags & FC_FR_ADDRESS)) {
        out->has_address = true;
        ok = fc_pb_varint(&r, &out->address) == 0;
    }
    if (ok && (flags & FC_FR_MAPPING)) {
        out->has_mapping = true;
        ok = fc_pb_varint(&r, &v) == 0 && v <= UINT32_MAX;
        out->mapping.flags = (uint32_t)v;
        ok = ok && get_str(&r, &out->mapping.file) && get_str(&r, &out->mapping.build_id) &&
             fc_pb_varint(&r, &out->mapping.start) == 0 &&
             fc_pb_varint(&r, &out->mapping.limit) == 0 &&
             fc_pb_varint(&r, &out->mapping.offset) == 0;
    }
    return ok && fc_pb_done(&r) ? FC_OK : FC_EPROTO;
}

void fc_frame_display(const struct fc_frame *f, enum fc_frame_granularity g, struct fc_buf *out)
{
    if (f->name.n == 0) {
        fc_buf_printf(out, "0x%" PRIx64, f->address);
        return;
    }
    fc_buf_append(out, f->name.p, f->name.n);
    if (g != FC_FRAME_LINES) {
        return;
    }
    if (f->line != 0) {
        fc_buf_append(out, " ", 1);
        fc_buf_append(out, f->file.p, f->file.n);
        fc_buf_printf(out, ":%" PRId64, f->line);
    } else if (f->file.n > 0) {
        fc_buf_append(out, " ", 1);
        fc_buf_append(out, f->file.p, f->file.n);
    }
}
