/* Placeholder replaced by the gRPC transport in the next step. */
#include "receivers/otlp/otlp.h"

int otlp_grpc_start(struct otlp_receiver *r, struct fc_error *err)
{
    (void)r;
    return fc_errorf(err, FC_ENOTSUP, "protocols.grpc is not implemented yet; use protocols.http");
}

void otlp_grpc_stop(struct otlp_receiver *r)
{
    (void)r;
}
