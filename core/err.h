/*
 * Errors: negative codes from one X-macro table, plus a message that names
 * what is wrong and where. Functions that can fail return an `int` code and
 * fill a `struct fc_error`; `return fc_errorf(err, FC_EPROTO, "...")` is the
 * idiom.
 */
#ifndef FC_ERR_H
#define FC_ERR_H

#define FC_ERR_MAP(XX)                                                                             \
    XX(EINVAL, -1, "invalid argument")                                                             \
    XX(EPROTO, -2, "malformed input")                                                              \
    XX(ETOOBIG, -3, "over a configured limit")                                                     \
    XX(EAGAIN, -4, "busy, retry later")                                                            \
    XX(ECONFIG, -5, "invalid configuration")                                                       \
    XX(EIO, -6, "i/o error")                                                                       \
    XX(ENOTSUP, -7, "not supported")                                                               \
    XX(EAUTH, -8, "unauthenticated")                                                               \
    XX(EUNAVAIL, -9, "unavailable, retry later")

enum fc_err {
    FC_OK = 0,
#define XX(name, val, msg) FC_##name = (val),
    FC_ERR_MAP(XX)
#undef XX
};

/* What a user sees: the code and a message naming the element at fault. */
struct fc_error {
    int code;
    char msg[512];
};

/* Fills err (when not NULL) and returns code. */
int fc_errorf(struct fc_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to an existing message, keeping the code. */
int fc_error_wrap(struct fc_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

const char *fc_strerror(int code);

/*
 * The back-pressure contract: FC_EAGAIN and FC_EUNAVAIL are retryable (the
 * client should come back, after Retry-After); everything else is permanent.
 */
int fc_err_retryable(int code);

/* The outcome to report for two: permanent errors outrank retryable ones (a client must not
 * retry bad data), any error outranks FC_OK. */
static inline int fc_err_worse(int a, int b)
{
    if (a == FC_OK) {
        return b;
    }
    if (b == FC_OK) {
        return a;
    }
    return fc_err_retryable(a) ? b : a;
}

int fc_err_http_status(int code); /* EPROTO->400, ETOOBIG->413, EAGAIN->429, EUNAVAIL->503 */
int fc_err_grpc_status(int code); /* EPROTO->INVALID_ARGUMENT(3), EAGAIN->RESOURCE_EXHAUSTED(8) */

#endif
