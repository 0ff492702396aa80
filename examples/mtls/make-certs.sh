#!/bin/sh
# Certificates for the mTLS chain (examples/mtls/*.yaml), made with openssl:
#   ca.crt/ca.key          the CA every hop trusts (ca_file, client_ca_file)
#   server.crt/server.key  every hop's listeners (SAN 127.0.0.1 and localhost)
#   client.crt/client.key  what a client shows: the sidecar and gateway exporters,
#                          the application's SDK, curl for queries
# and env.sh, to source: FLAMECOL_TLS_DIR and a fresh random token each.
#   examples/mtls/make-certs.sh [DIR]      (default ./flamecol-certs)
set -eu
dir=${1:-./flamecol-certs}
mkdir -p "$dir"
cd "$dir"
ec="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
openssl req -x509 $ec -days 365 -keyout ca.key -out ca.crt -subj "/CN=flamecol example CA" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > server.ext
openssl req $ec -keyout server.key -out server.csr -subj /CN=localhost 2>/dev/null
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -set_serial 1 -days 365 \
  -extfile server.ext -out server.crt 2>/dev/null
openssl req $ec -keyout client.key -out client.csr -subj /CN=flamecol-client 2>/dev/null
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -set_serial 2 -days 365 \
  -out client.crt 2>/dev/null
rm -f server.csr client.csr server.ext
chmod 600 ca.key server.key client.key
cat > env.sh <<ENV
export FLAMECOL_TLS_DIR=$(pwd)
export SIDECAR_TOKEN=$(openssl rand -hex 16)
export GATEWAY_TOKEN=$(openssl rand -hex 16)
export BACKEND_TOKEN=$(openssl rand -hex 16)
export BACKEND_READ_TOKEN=$(openssl rand -hex 16)
ENV
echo "certificates and env.sh in $(pwd)"
