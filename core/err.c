#include "core/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int fc_errorf(struct fc_error *err, int code, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL) {
        return code;
    }
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return code;
}

int fc_error_wrap(struct fc_error *err, const char *fmt, ...)
{
    char prefix[256];
    char old[sizeof(err->msg)];
    size_t n;
    size_t m;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    old[sizeof(old) - 1] = '\0';
    /* "prefix: old", cut to fit. */
    n = strlen(prefix);
    if (n > sizeof(err->msg) - 3) {
        n = sizeof(err->msg) - 3;
    }
    memcpy(err->msg, prefix, n);
    memcpy(err->msg + n, ": ", 2);
    m = strlen(old);
    if (m > sizeof(err->msg) - n - 3) {
        m = sizeof(err->msg) - n - 3;
    }
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = '\0';
    return err->code;
}

const char *fc_strerror(int code)
{
    switch (code) {
    case FC_OK:
        return "ok";
#define XX(name, val, msg)                                                                         \
    case FC_##name:                                                                                \
        return msg;
        FC_ERR_MAP(XX)
#undef XX
    }
    return "unknown error";
}

int fc_err_retryable(int code)
{
    return code == FC_EAGAIN || code == FC_EUNAVAIL;
}

int fc_err_http_status(int code)
{
    switch (code) {
    case FC_OK:
        return 200;
    case FC_EINVAL:
    case FC_EPROTO:
        return 400;
    case FC_EAUTH:
        return 401;
    case FC_ETOOBIG:
        return 413;
    case FC_EAGAIN:
        return 429;
    case FC_ENOTSUP:
        return 501;
    case FC_EUNAVAIL:
        return 503;
    default:
        return 500;
    }
}

int fc_err_grpc_status(int code)
{
    switch (code) {
    case FC_OK:
        return 0;
    case FC_EINVAL:
    case FC_EPROTO:
        return 3; /* INVALID_ARGUMENT */
    case FC_ETOOBIG:
    case FC_EAGAIN:
        return 8; /* RESOURCE_EXHAUSTED */
    case FC_ENOTSUP:
        return 12; /* UNIMPLEMENTED */
    case FC_EAUTH:
        return 16; /* UNAUTHENTICATED */
    case FC_EUNAVAIL:
        return 14; /* UNAVAILABLE */
    default:
        return 13; /* INTERNAL */
    }
}
