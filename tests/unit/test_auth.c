/*
 * The authenticator (core/auth.c): tokens, basic users from an htpasswd file
 * of bcrypt hashes, roles, tenants, the failure limit and config errors.
 * The bcrypt hashes are Openwall crypt_blowfish's published test vectors
 * (password "U*U", "U*U*" and ""), not hashes made by the code under test.
 */
#include "core/auth.h"

#include "fc_test.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#define SEC 1000000000LL

/* Openwall crypt_blowfish test vectors. */
#define HASH_UXU "$2a$05$CCCCCCCCCCCCCCCCCCCCC.E5YPO9kmyuRGyh0XouQYb4YMJKvyOeW"   /* U*U */
#define HASH_UXUX "$2a$05$CCCCCCCCCCCCCCCCCCCCC.VGOzA784oUp/Z0DY336zx7pLYAy0lwK"  /* U*U* */
#define HASH_EMPTY "$2a$05$CCCCCCCCCCCCCCCCCCCCC.7uG0VCzI2bS7j6ymqJi9CdcdxiRTWNy" /* "" */

/* base64 of the strings, computed by hand (RFC 4648). */
#define B64_ALICE_UXU "YWxpY2U6VSpV"      /* alice:U*U */
#define B64_ALICE_UXUX "YWxpY2U6VSpVKg==" /* alice:U*U* */
#define B64_BOB_UXUX "Ym9iOlUqVSo="       /* bob:U*U* */
#define B64_BOB_UXU "Ym9iOlUqVQ=="        /* bob:U*U */
#define B64_CAROL_EMPTY "Y2Fyb2w6"        /* carol: */
#define B64_DAVE_UXU "ZGF2ZTpVKlU="       /* dave:U*U */

static char htpasswd[64];

static void write_htpasswd(const char *text)
{
    FILE *f;
    int fd;

    strcpy(htpasswd, "/tmp/fc-test-htpasswd-XXXXXX");
    fd = mkstemp(htpasswd);
    assert_true(fd >= 0);
    f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
}

/* Builds an authenticator from YAML (%s = the htpasswd path); NULL and err on failure. */
static struct fc_auth *build(const char *yaml_fmt, struct fc_error *err)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_diag d;
    char text[4096];
    struct fc_node *n;
    struct fc_auth *auth = NULL;

    fc_diag_init(&d);
    snprintf(text, sizeof(text), yaml_fmt, htpasswd);
    n = fc_test_yaml(a, text, &d);
    assert_non_null(n);
    assert_int_equal(d.n_errors, 0);
    memset(err, 0, sizeof(*err));
    if (fc_auth_new(n, &auth, err) != FC_OK) {
        auth = NULL;
    }
    fc_diag_release(&d);
    fc_arena_free(a);
    return auth;
}

static const char *USERS = "# users\n"
                           "alice:" HASH_UXU "\n"
                           "\n"
                           "bob:" HASH_UXUX "\r\n"
                           "carol:" HASH_EMPTY "\n";

static const char *CONFIG = "bearer_tokens:\n"
                            "  - {token: tok-a-rw, tenant: team-a}\n"
                            "  - {token: tok-a-r, tenant: team-a, roles: [read]}\n"
                            "  - {token: tok-b-w, tenant: team-b, roles: [write]}\n"
                            "  - {token: tok-any}\n"
                            "basic:\n"
                            "  htpasswd_file: %s\n"
                            "  tenants: {alice: team-a, bob: team-b}\n"
                            "  roles: {bob: [read]}\n"
                            "max_failures_per_minute: 3\n";

static void check(struct fc_auth *a, const char *authz, const char *client, unsigned need,
                  const char *claim, int64_t now, enum fc_auth_outcome want, const char *tenant)
{
    struct fc_auth_decision d;

    fc_auth_check(a, authz, client, need, claim, now, &d);
    if (d.outcome != want) {
        fail_msg("%s (%s): got %s (%s), want %s", authz ? authz : "(none)", claim ? claim : "-",
                 fc_auth_outcome_name(d.outcome), d.message, fc_auth_outcome_name(want));
    }
    if (want == FC_AUTH_OK) {
        if (tenant == NULL) {
            assert_null(d.tenant);
        } else {
            assert_non_null(d.tenant);
            assert_string_equal(d.tenant, tenant);
        }
    } else {
        assert_true(d.message[0] != '\0');
    }
}

static void test_tokens_roles_and_tenants(void **state)
{
    struct fc_error err;
    struct fc_auth *a;

    (void)state;
    write_htpasswd(USERS);
    a = build(CONFIG, &err);
    assert_non_null(a);
    check(a, "Bearer tok-a-rw", "c1", FC_AUTH_WRITE, NULL, 0, FC_AUTH_OK, "team-a");
    check(a, "bearer   tok-a-rw", "c1", FC_AUTH_READ, "team-a", 0, FC_AUTH_OK, "team-a");
    check(a, "Bearer tok-a-rw", "c1", FC_AUTH_READ, "team-b", 0, FC_AUTH_WRONG_TENANT, NULL);
    check(a, "Bearer tok-a-r", "c1", FC_AUTH_READ, NULL, 0, FC_AUTH_OK, "team-a");
    check(a, "Bearer tok-a-r", "c1", FC_AUTH_WRITE, NULL, 0, FC_AUTH_NO_ROLE, NULL);
    check(a, "Bearer tok-b-w", "c1", FC_AUTH_WRITE, NULL, 0, FC_AUTH_OK, "team-b");
    check(a, "Bearer tok-b-w", "c1", FC_AUTH_READ, NULL, 0, FC_AUTH_NO_ROLE, NULL);
    /* Bound to no tenant: the claim, or none. */
    check(a, "Bearer tok-any", "c1", FC_AUTH_WRITE, "team-z", 0, FC_AUTH_OK, "team-z");
    check(a, "Bearer tok-any", "c1", FC_AUTH_WRITE, NULL, 0, FC_AUTH_OK, NULL);
    check(a, NULL, "c1", FC_AUTH_READ, NULL, 0, FC_AUTH_MISSING, NULL);
    check(a, "", "c1", FC_AUTH_READ, NULL, 0, FC_AUTH_MISSING, NULL);
    fc_auth_free(a);
    unlink(htpasswd);
}

static void test_wrong_tokens_are_refused(void **state)
{
    struct fc_error err;
    struct fc_auth *a;
    /* Each from its own client address, so the failure limit stays out of the way. */
    const char *bad[] = {"Bearer tok-a-r", /* valid: the control */
                         "Bearer tok-a-",  "Bearer tok-a-rw2", "Bearer TOK-A-RW", "Bearertok-a-rw",
                         "Token tok-a-rw", "tok-a-rw",         "Bearer ",         "Basic tok-a-rw"};

    (void)state;
    write_htpasswd(USERS);
    a = build(CONFIG, &err);
    assert_non_null(a);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char client[16];
        snprintf(client, sizeof(client), "bad%zu", i);
        check(a, bad[i], client, FC_AUTH_READ, NULL, 0, i == 0 ? FC_AUTH_OK : FC_AUTH_BAD,
              i == 0 ? "team-a" : NULL);
    }
    fc_auth_free(a);
    unlink(htpasswd);
}

static void test_basic_users(void **state)
{
    struct fc_error err;
    struct fc_auth *a;

    (void)state;
    write_htpasswd(USERS);
    a = build(CONFIG, &err);
    assert_non_null(a);
    for (int round = 0; round < 2; round++) { /* the second round answers from the cache */
        check(a, "Basic " B64_ALICE_UXU, "u1", FC_AUTH_WRITE, NULL, 0, FC_AUTH_OK, "team-a");
        check(a, "Basic " B64_BOB_UXUX, "u2", FC_AUTH_READ, "team-b", 0, FC_AUTH_OK, "team-b");
        check(a, "Basic " B64_BOB_UXUX, "u3", FC_AUTH_WRITE, NULL, 0, FC_AUTH_NO_ROLE, NULL);
        check(a, "Basic " B64_CAROL_EMPTY, "u4", FC_AUTH_READ, "x", 0, FC_AUTH_OK, "x");
        /* A verified password never vouches for another one, or for another user. */
        check(a, "Basic " B64_ALICE_UXUX, "w1", FC_AUTH_READ, NULL, 0, FC_AUTH_BAD, NULL);
        check(a, "Basic " B64_BOB_UXU, "w2", FC_AUTH_READ, NULL, 0, FC_AUTH_BAD, NULL);
        check(a, "Basic " B64_DAVE_UXU, "w3", FC_AUTH_READ, NULL, 0, FC_AUTH_BAD, NULL);
        check(a, "Basic !!!", "w4", FC_AUTH_READ, NULL, 0, FC_AUTH_BAD, NULL);
        check(a, "Basic YWxpY2U=", "w5", FC_AUTH_READ, NULL, 0, FC_AUTH_BAD, NULL); /* "alice" */
    }
    fc_auth_free(a);
    unlink(htpasswd);
}

static void test_failures_are_limited_per_client(void **state)
{
    struct fc_error err;
    struct fc_auth *a;

    (void)state;
    write_htpasswd(USERS);
    a = build(CONFIG, &err);
    assert_non_null(a);
    for (int i = 0; i < 3; i++) {
        check(a, "Bearer nope", "10.0.0.1", FC_AUTH_READ, NULL, i * SEC, FC_AUTH_BAD, NULL);
    }
    /* The fourth attempt within the minute is refused before it is checked, right or wrong. */
    check(a, "Bearer tok-a-rw", "10.0.0.1", FC_AUTH_READ, NULL, 10 * SEC, FC_AUTH_THROTTLED, NULL);
    check(a, "Basic " B64_ALICE_UXU, "10.0.0.1", FC_AUTH_READ, NULL, 10 * SEC, FC_AUTH_THROTTLED,
          NULL);
    /* Another address is not affected; a minute after the first failure, it is over. */
    check(a, "Bearer tok-a-rw", "10.0.0.2", FC_AUTH_READ, NULL, 10 * SEC, FC_AUTH_OK, "team-a");
    check(a, "Bearer tok-a-rw", "10.0.0.1", FC_AUTH_READ, NULL, 61 * SEC, FC_AUTH_OK, "team-a");
    /* Missing credentials are not failures (a browser asks first without them). */
    for (int i = 0; i < 5; i++) {
        check(a, NULL, "10.0.0.3", FC_AUTH_READ, NULL, 0, FC_AUTH_MISSING, NULL);
    }
    check(a, "Bearer tok-a-rw", "10.0.0.3", FC_AUTH_READ, NULL, 0, FC_AUTH_OK, "team-a");
    fc_auth_free(a);
    unlink(htpasswd);
}

static void expect_config_error(const char *users, const char *yaml, const char *needle)
{
    struct fc_error err;
    struct fc_auth *a;

    write_htpasswd(users);
    a = build(yaml, &err);
    unlink(htpasswd);
    if (a != NULL) {
        fc_auth_free(a);
        fail_msg("accepted: %s", yaml);
    }
    if (strstr(err.msg, needle) == NULL) {
        fail_msg("error \"%s\" does not say \"%s\"", err.msg, needle);
    }
}

static void test_config_errors(void **state)
{
    (void)state;
    expect_config_error("alice:$apr1$abc$defghijklmnopqrstuvwx\n", "basic: {htpasswd_file: %s}\n",
                        "line 1 (user alice): only bcrypt");
    expect_config_error("alice:" HASH_UXU "\nnocolon\n", "basic: {htpasswd_file: %s}\n",
                        "line 2: expected user:hash");
    expect_config_error("alice:" HASH_UXU "\nalice:" HASH_UXUX "\n", "basic: {htpasswd_file: %s}\n",
                        "user alice given twice");
    expect_config_error(USERS, "basic: {htpasswd_file: %s, tenants: {dave: t}}\n",
                        "not in htpasswd_file: dave");
    expect_config_error(USERS, "basic: {htpasswd_file: %s, roles: {alice: [admin]}}\n",
                        "each is read or write");
    expect_config_error(USERS, "basic: {htpasswd_file: %s.missing}\n", "No such file");
    expect_config_error(USERS, "bearer_tokens: [{token: ''}]\n# %s\n", "must not be empty");
    expect_config_error(USERS, "bearer_tokens: [{token: a}, {token: a}]\n# %s\n", "given twice");
    expect_config_error(USERS, "bearer_tokens: [{token: a, tennant: x}]\n# %s\n", "unknown key");
    expect_config_error(USERS, "bearer_tokens: [{token: a, tenant: 'a b'}]\n# %s\n",
                        "not a valid tenant");
    expect_config_error(USERS, "bearer_tokens: []\n# %s\n", "no credential");
    expect_config_error(USERS, "bearer_tokens: [{token: a}]\nmax_failures_per_minute: -1\n# %s\n",
                        "max_failures_per_minute");
    expect_config_error(USERS, "token: a\n# %s\n", "test.yaml:1:1: auth: unknown key");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_roles_and_tenants),
        cmocka_unit_test(test_wrong_tokens_are_refused),
        cmocka_unit_test(test_basic_users),
        cmocka_unit_test(test_failures_are_limited_per_client),
        cmocka_unit_test(test_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
