/*
 * The authenticator's two readers of outside input: the Authorization
 * header (every request) and the htpasswd file (at start). The first byte
 * picks one: even = the rest is an Authorization value checked against a
 * fixed set of tokens and users (bcrypt hashes at cost 5, so a fuzzed
 * "alice:..." costs a few ms, not tens); odd = the rest is an htpasswd
 * file's text. Checks: a decision is always one of the outcomes, OK only
 * for the configured credentials' tenants, and a message comes with every
 * refusal.
 */
#define _GNU_SOURCE
#include "config/diag.h"
#include "config/load.h"
#include "core/arena.h"
#include "core/auth.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char USERS[] = "alice:$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW\n"
                            "carol:$2a$05$CCCCCCCCCCCCCCCCCCCCC.7uG0VCzI2bS7j6ymqJi9CdcdxiRTWNy\n";

/* An authenticator whose basic users come from text (written to a memfd). */
static struct fc_auth *build(const uint8_t *users, size_t n, const char *tokens)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_diag d;
    struct fc_error err = {0};
    struct fc_auth *auth = NULL;
    struct fc_node *node;
    char yaml[512];
    int fd = memfd_create("htpasswd", 0);

    if (fd < 0 || write(fd, users, n) != (ssize_t)n) {
        abort();
    }
    snprintf(yaml, sizeof(yaml),
             "%sbasic: {htpasswd_file: /proc/self/fd/%d, tenants: {alice: team-a}}\n"
             "max_failures_per_minute: 0\n",
             tokens, fd);
    fc_diag_init(&d);
    node = fc_config_load_string(a, "fuzz.yaml", yaml, strlen(yaml), &d);
    if (node == NULL) {
        abort();
    }
    if (fc_auth_new(node, &auth, &err) != FC_OK) {
        auth = NULL;
        if (err.msg[0] == '\0') {
            abort(); /* a refusal always says why */
        }
    }
    fc_diag_release(&d);
    fc_arena_free(a);
    close(fd);
    return auth;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct fc_auth *fixed;
    struct fc_auth_decision dec;
    char *header;

    if (size == 0) {
        return 0;
    }
    if (data[0] & 1) {
        fc_auth_free(build(data + 1, size - 1, ""));
        return 0;
    }
    if (fixed == NULL &&
        (fixed = build((const uint8_t *)USERS, sizeof(USERS) - 1,
                       "bearer_tokens: [{token: tok-a, tenant: team-a}, {token: tok-any}]\n")) ==
            NULL) {
        abort();
    }
    header = malloc(size);
    memcpy(header, data + 1, size - 1);
    header[size - 1] = '\0';
    fc_auth_check(fixed, header, "fuzz", FC_AUTH_READ, NULL, 0, &dec);
    if ((unsigned)dec.outcome >= FC_AUTH_OUTCOMES ||
        (dec.outcome == FC_AUTH_OK && dec.tenant != NULL && strcmp(dec.tenant, "team-a") != 0) ||
        (dec.outcome != FC_AUTH_OK && dec.message[0] == '\0')) {
        abort();
    }
    free(header);
    return 0;
}
