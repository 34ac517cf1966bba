/* The node list (be.list): which nodes to poll and how.
 *
 * A list is parsed line by line; a bad line is described ("be.list:12: ...")
 * and skipped so one typo does not take the fleet offline, unless the caller
 * asks for strict mode. Everything a node owns is malloc'd so nodes can be
 * copied into the daemon and outlive the list they came from (SIGHUP reload
 * swaps lists while fetches are still running). */
#include "collector/poll/poll.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NODELIST_MAX_LINE (1u << 20)
#define NODELIST_MAX_NODES 100000u
#define NODELIST_MAX_FILE ((size_t)64 << 20)
#define NODELIST_MAX_LABELS 64u

static const char *const kind_names[] = {
    [POLL_KIND_STARROCKS] = "starrocks",
    [POLL_KIND_DORIS] = "doris",
    [POLL_KIND_DATABEND] = "databend",
    [POLL_KIND_AGENT] = "agent",
    [POLL_KIND_URL] = "url",
    [POLL_KIND_STARROCKS_FE] = "starrocks-fe",
    [POLL_KIND_DORIS_FE] = "doris-fe",
};

static const char *const option_names[] = {
    "name", "user", "password_file", "tls", "agent", "activate", "metrics", "brpc", "process",
    "prefix", "token_file", "ca_file", "cert_file", "key_file", "delete_after_fetch",
    "agent_port", "follow_redirects", "max_body", "max_decoded", "max_ratio", "max_stacks",
    "max_frames",
};

const char *poll_kind_name(enum poll_kind k)
{
    if ((size_t)k < HP_ARRAY_SIZE(kind_names))
        return kind_names[k];
    return "?";
}

void poll_node_free(struct poll_node *n)
{
    if (!n)
        return;
    free(n->name);
    free(n->addr);
    free(n->user);
    if (n->password) {
        /* A secret: do not leave it in freed heap memory. */
        explicit_bzero(n->password, strlen(n->password));
        free(n->password);
    }
    free(n->password_file);
    free(n->token_file);
    free(n->token);
    free(n->agent);
    free(n->metrics);
    free(n->brpc);
    free(n->process);
    free(n->ca_file);
    free(n->cert_file);
    free(n->key_file);
    free(n->fe_line);
    for (size_t i = 0; i < n->nlabels; i++) {
        free(n->labels[i].key);
        free(n->labels[i].value);
    }
    free(n->labels);
    free(n);
}

static char *dup_or_null(const char *s)
{
    return s ? hp_xstrdup(s) : NULL;
}

struct poll_node *poll_node_dup(const struct poll_node *n)
{
    struct poll_node *c = hp_xcalloc(1, sizeof(*c));
    c->kind = n->kind;
    c->name = hp_xstrdup(n->name);
    c->addr = hp_xstrdup(n->addr);
    c->user = dup_or_null(n->user);
    c->password = dup_or_null(n->password);
    c->password_file = dup_or_null(n->password_file);
    c->token_file = dup_or_null(n->token_file);
    c->token = dup_or_null(n->token);
    c->tls = n->tls;
    c->redirects = n->redirects;
    c->agent = dup_or_null(n->agent);
    c->metrics = dup_or_null(n->metrics);
    c->brpc = dup_or_null(n->brpc);
    c->process = dup_or_null(n->process);
    c->activate = n->activate;
    c->ca_file = dup_or_null(n->ca_file);
    c->cert_file = dup_or_null(n->cert_file);
    c->key_file = dup_or_null(n->key_file);
    c->delete_after_fetch = n->delete_after_fetch;
    c->agent_port = n->agent_port;
    c->fe_state = n->fe_state;
    c->fe_line = dup_or_null(n->fe_line);
    c->line = n->line;
    c->max_body = n->max_body;
    c->max_decoded = n->max_decoded;
    c->max_ratio = n->max_ratio;
    c->max_stacks = n->max_stacks;
    c->max_frames = n->max_frames;
    if (n->nlabels) {
        c->labels = hp_xcalloc(n->nlabels, sizeof(*c->labels));
        for (size_t i = 0; i < n->nlabels; i++) {
            c->labels[i].key = hp_xstrdup(n->labels[i].key);
            c->labels[i].value = hp_xstrdup(n->labels[i].value);
        }
        c->nlabels = n->nlabels;
    }
    return c;
}

static bool str_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

bool poll_node_equal(const struct poll_node *a, const struct poll_node *b)
{
    if (a->kind != b->kind || a->tls != b->tls || a->activate != b->activate ||
        a->nlabels != b->nlabels || a->delete_after_fetch != b->delete_after_fetch ||
        a->agent_port != b->agent_port || a->fe_state != b->fe_state ||
        a->redirects != b->redirects || a->max_body != b->max_body ||
        a->max_decoded != b->max_decoded || a->max_ratio != b->max_ratio ||
        a->max_stacks != b->max_stacks || a->max_frames != b->max_frames)
        return false;
    if (!str_eq(a->ca_file, b->ca_file) || !str_eq(a->cert_file, b->cert_file) ||
        !str_eq(a->key_file, b->key_file) || !str_eq(a->fe_line, b->fe_line))
        return false;
    if (!str_eq(a->name, b->name) || !str_eq(a->addr, b->addr) || !str_eq(a->user, b->user) ||
        !str_eq(a->password, b->password) || !str_eq(a->agent, b->agent) ||
        !str_eq(a->metrics, b->metrics) || !str_eq(a->brpc, b->brpc) ||
        !str_eq(a->process, b->process) || !str_eq(a->token_file, b->token_file))
        return false;
    for (size_t i = 0; i < a->nlabels; i++)
        if (!str_eq(a->labels[i].key, b->labels[i].key) ||
            !str_eq(a->labels[i].value, b->labels[i].value))
            return false;
    return true;
}

void poll_nodelist_free(struct poll_nodelist *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->n; i++) {
        /* Nodes are stored by value; free their members, not the struct. */
        struct poll_node *n = hp_xcalloc(1, sizeof(*n));
        *n = l->nodes[i];
        poll_node_free(n);
    }
    free(l->nodes);
    free(l);
}

/* HOST:PORT with HOST a name, IPv4 address or [IPv6]; PORT 1..65535. */
static int check_hostport(const char *s, const char **why)
{
    const char *colon;
    if (*s == '[') {
        const char *close = strchr(s, ']');
        if (!close || close == s + 1) {
            *why = "unterminated [IPv6] address";
            return -1;
        }
        colon = close + 1;
        if (*colon != ':') {
            *why = "missing :PORT";
            return -1;
        }
    } else {
        colon = strrchr(s, ':');
        if (!colon) {
            *why = "missing :PORT";
            return -1;
        }
        if (colon == s) {
            *why = "empty host";
            return -1;
        }
        for (const char *p = s; p < colon; p++) {
            if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_') {
                *why = "host has a character that is not allowed in a host name";
                return -1;
            }
        }
    }
    uint64_t port;
    if (hp_parse_u64(colon + 1, strlen(colon + 1), &port) < 0 || port == 0 || port > 65535) {
        *why = "port is not a number from 1 to 65535";
        return -1;
    }
    return 0;
}

static int check_url(const char *s, const char **why)
{
    const char *rest;
    if (strncmp(s, "http://", 7) == 0)
        rest = s + 7;
    else if (strncmp(s, "https://", 8) == 0)
        rest = s + 8;
    else {
        *why = "a url node needs an http:// or https:// URL";
        return -1;
    }
    if (*rest == '\0' || *rest == '/') {
        *why = "URL has no host";
        return -1;
    }
    for (const char *p = s; *p; p++) {
        if ((unsigned char)*p <= ' ' || *p == 0x7f) {
            *why = "URL contains a space or control character";
            return -1;
        }
    }
    return 0;
}

/* Edit distance with adjacent transpositions counted as one edit ("nmae" is
 * one slip from "name"), capped: only used to spot misspelt option names. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 32 || lb > 32)
        return 99;
    size_t d[33][33];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            size_t del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = HP_MIN(sub, HP_MIN(del, ins));
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                d[i][j] = HP_MIN(d[i][j], d[i - 2][j - 2] + 1);
        }
    return d[la][lb];
}

static const char *near_option(const char *key)
{
    for (size_t i = 0; i < HP_ARRAY_SIZE(option_names); i++) {
        size_t len = strlen(option_names[i]);
        size_t limit = len >= 6 ? 2 : 1;
        if (edit_distance(key, option_names[i]) <= limit)
            return option_names[i];
    }
    return NULL;
}

static int parse_bool(const char *v, bool *ret)
{
    if (!strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1") || !strcmp(v, "on")) {
        *ret = true;
        return 0;
    }
    if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "0") || !strcmp(v, "off")) {
        *ret = false;
        return 0;
    }
    return -1;
}

/* First line of a password file, without the line end. */
static int read_password(const char *path, char **ret, struct hp_buf *why)
{
    char *data = NULL;
    size_t len = 0;
    int r = hp_file_read(path, 64 * 1024, &data, &len, why);
    if (r < 0)
        return r;
    size_t n = strcspn(data, "\r\n");
    char *pw = hp_xstrndup(data, n);
    explicit_bzero(data, len);
    free(data);
    *ret = pw;
    return 0;
}

struct parse_ctx {
    const char *source;
    unsigned line;
    unsigned flags;
    size_t warnings;
    struct hp_buf *err;
};

static void line_error(struct parse_ctx *c, const char *fmt, ...) HP_PRINTF(2, 3);
static void line_error(struct parse_ctx *c, const char *fmt, ...)
{
    if (!c->err)
        return;
    if (c->err->len)
        (void)hp_buf_puts(c->err, "\n");
    (void)hp_buf_printf(c->err, "%s:%u: ", c->source, c->line);
    va_list ap;
    va_start(ap, fmt);
    (void)hp_buf_vprintf(c->err, fmt, ap);
    va_end(ap);
}

static void line_warning(struct parse_ctx *c, const char *fmt, ...) HP_PRINTF(2, 3);
static void line_warning(struct parse_ctx *c, const char *fmt, ...)
{
    c->warnings++;
    if (!c->err)
        return;
    if (c->err->len)
        (void)hp_buf_puts(c->err, "\n");
    (void)hp_buf_printf(c->err, "%s:%u: warning: ", c->source, c->line);
    va_list ap;
    va_start(ap, fmt);
    (void)hp_buf_vprintf(c->err, fmt, ap);
    va_end(ap);
}

/* A readable regular file, for the TLS options: checked at load so a typo
 * in a path is reported with its line, not as a TLS failure at poll time. */
static int check_readable(const char *path, const char **why)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *why = strerror(errno);
        return -1;
    }
    fclose(f);
    return 0;
}

/* HOST:PORT[,HOST:PORT...] of an FE line. */
static int check_hostport_list(const char *s, const char **why)
{
    for (;;) {
        size_t len = strcspn(s, ",");
        char *one = hp_xstrndup(s, len);
        int r = len ? check_hostport(one, why) : -1;
        if (!len)
            *why = "empty address in the list";
        free(one);
        if (r < 0)
            return -1;
        if (!s[len])
            return 0;
        s += len + 1;
    }
}

/* Split a line into whitespace-separated words, in place. */
static size_t split_words(char *s, char **words, size_t max)
{
    size_t n = 0;
    while (*s) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            break;
        if (n == max)
            return max + 1;
        words[n++] = s;
        while (*s && *s != ' ' && *s != '\t')
            s++;
        if (*s)
            *s++ = '\0';
    }
    return n;
}

static int kind_parse(const char *w, enum poll_kind *ret)
{
    for (size_t i = 0; i < HP_ARRAY_SIZE(kind_names); i++)
        if (!strcmp(w, kind_names[i])) {
            *ret = (enum poll_kind)i;
            return 0;
        }
    return -1;
}

static bool looks_like_address(const char *w)
{
    return strchr(w, ':') != NULL && strchr(w, '=') == NULL;
}

/* Parse one non-blank, comment-stripped line into *n. 0 or -1 (reported). */
/* Percent-decode n bytes of s into a new string; NULL on a bad escape or a
 * decoded NUL. */
static char *pct_decode(const char *s, size_t n)
{
    char *out = hp_xmalloc(n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            out[o++] = s[i];
            continue;
        }
        uint64_t v;
        if (i + 2 >= n) {
            free(out);
            return NULL;
        }
        if (hp_parse_hex64(s + i + 1, 2, &v) < 0 || v == 0) {
            free(out);
            return NULL;
        }
        out[o++] = (char)v;
        i += 2;
    }
    out[o] = '\0';
    return out;
}

/* A url node's "user:password@" moves into user/password, so the address
 * kept, logged, labelled and shown never holds a credential. */
static int url_take_userinfo(struct parse_ctx *c, struct poll_node *n)
{
    char *auth = strstr(n->addr, "://") + 3;
    size_t alen = strcspn(auth, "/?#");
    char *at = NULL;
    for (char *p = auth; p < auth + alen; p++)
        if (*p == '@')
            at = p;
    if (!at)
        return 0;
    if (n->user) {
        line_error(c, "credentials both in the URL and in user=: keep one (user= and "
                      "password_file= keep the password out of the node list)");
        return -1;
    }
    char *colon = memchr(auth, ':', (size_t)(at - auth));
    size_t ulen = colon ? (size_t)(colon - auth) : (size_t)(at - auth);
    n->user = pct_decode(auth, ulen);
    if (colon)
        n->password = pct_decode(colon + 1, (size_t)(at - colon - 1));
    if (!n->user || (colon && !n->password)) {
        line_error(c, "bad %%-escape in the URL's user:password");
        return -1;
    }
    memmove(auth, at + 1, strlen(at + 1) + 1);
    return 0;
}

/* The name of a node without name=: its address (a url node's host, port
 * and path) with every byte outside the allowed set made '_', IPv6
 * brackets dropped, capped at HP_NAME_MAX. */
static char *derive_name(const struct poll_node *n)
{
    const char *s = n->addr;
    if (n->kind == POLL_KIND_URL)
        s = strstr(s, "://") + 3;
    size_t len = strcspn(s, "?#");
    while (len > 0 && s[len - 1] == '/')
        len--;
    char *out = hp_xmalloc(HP_NAME_MAX + 1);
    size_t o = 0;
    for (size_t i = 0; i < len && o < HP_NAME_MAX; i++) {
        char ch = s[i];
        if (ch == '[' || ch == ']')
            continue;
        size_t at;
        out[o++] = hp_name_check(&ch, 1, &at) == 0 ? ch : '_';
    }
    if (o == 0)
        out[o++] = '_';
    out[o] = '\0';
    return out;
}

static int parse_line(struct parse_ctx *c, char *text, struct poll_node *n)
{
    char *words[2 + 16 + NODELIST_MAX_LABELS] = {0};
    size_t nw = split_words(text, words, HP_ARRAY_SIZE(words));
    if (nw == 0)
        return -1; /* callers skip blank lines; never reached */
    if (nw > HP_ARRAY_SIZE(words)) {
        line_error(c, "too many words (at most %zu)", HP_ARRAY_SIZE(words));
        return -1;
    }
    size_t i = 0;
    n->kind = POLL_KIND_STARROCKS;
    if (!strncmp(words[0], "http://", 7) || !strncmp(words[0], "https://", 8)) {
        n->kind = POLL_KIND_URL; /* a bare URL needs no kind word */
    } else if (!looks_like_address(words[0])) {
        if (kind_parse(words[0], &n->kind) < 0) {
            line_error(c, "unknown kind \"%s\" (expected doris, starrocks, databend, agent, url, "
                       "doris-fe, starrocks-fe)",
                       words[0]);
            return -1;
        }
        i = 1;
    }
    if (i >= nw) {
        line_error(c, "missing address after \"%s\" (expected %s)", words[0],
                   n->kind == POLL_KIND_URL ? "a full URL" : "HOST:PORT");
        return -1;
    }
    const char *why = NULL;
    const char *addr = words[i++];
    int ar;
    if (n->kind == POLL_KIND_URL)
        ar = check_url(addr, &why);
    else if (poll_kind_is_fe(n->kind))
        ar = check_hostport_list(addr, &why);
    else
        ar = check_hostport(addr, &why);
    if (ar < 0) {
        line_error(c, "bad address \"%s\": %s", addr, why);
        return -1;
    }
    n->addr = hp_xstrdup(addr);
    const char *tls_word = NULL;
    for (; i < nw; i++) {
        char *w = words[i];
        char *eq = strchr(w, '=');
        if (!eq || eq == w) {
            line_error(c, "expected key=value, got \"%s\"", w);
            return -1;
        }
        *eq = '\0';
        const char *key = w, *val = eq + 1;
        char **slot = NULL;
        bool is_hostport = false;
        if (!strcmp(key, "name"))
            slot = &n->name;
        else if (!strcmp(key, "user"))
            slot = &n->user;
        else if (!strcmp(key, "password_file"))
            slot = &n->password_file;
        else if (!strcmp(key, "agent"))
            slot = &n->agent, is_hostport = true;
        else if (!strcmp(key, "metrics"))
            slot = &n->metrics, is_hostport = true;
        else if (!strcmp(key, "brpc"))
            slot = &n->brpc, is_hostport = true;
        else if (!strcmp(key, "process") || !strcmp(key, "prefix"))
            slot = &n->process; /* the agent's dump-name prefix */
        else if (!strcmp(key, "token_file"))
            slot = &n->token_file;
        else if (!strcmp(key, "ca_file"))
            slot = &n->ca_file;
        else if (!strcmp(key, "cert_file"))
            slot = &n->cert_file;
        else if (!strcmp(key, "key_file"))
            slot = &n->key_file;
        else if (!strcmp(key, "delete_after_fetch")) {
            if (parse_bool(val, &n->delete_after_fetch) < 0) {
                line_error(c, "delete_after_fetch=%s: expected yes or no", val);
                return -1;
            }
            continue;
        } else if (!strcmp(key, "max_body") || !strcmp(key, "max_decoded")) {
            uint64_t v;
            if (hp_size_parse(val, &v) < 0) {
                line_error(c, "%s=%s: expected a size (64M, 1G, bytes)", key, val);
                return -1;
            }
            *(key[4] == 'b' ? &n->max_body : &n->max_decoded) = v;
            continue;
        } else if (!strcmp(key, "max_ratio") || !strcmp(key, "max_stacks") ||
                   !strcmp(key, "max_frames")) {
            uint64_t v;
            uint64_t hi = key[4] == 's' ? ((uint64_t)1 << 32) : 100000;
            if (hp_parse_u64(val, strlen(val), &v) < 0 || v == 0 || v > hi) {
                line_error(c, "%s=%s: expected a whole number from 1 to %llu", key, val,
                           (unsigned long long)hi);
                return -1;
            }
            if (key[4] == 's')
                n->max_stacks = v;
            else if (key[4] == 'r')
                n->max_ratio = (uint32_t)v;
            else
                n->max_frames = (uint32_t)v;
            continue;
        } else if (!strcmp(key, "agent_port")) {
            uint64_t port;
            if (hp_parse_u64(val, strlen(val), &port) < 0 || port == 0 || port > 65535) {
                line_error(c, "agent_port=%s: expected a port from 1 to 65535", val);
                return -1;
            }
            n->agent_port = (uint16_t)port;
            continue;
        } else if (!strcmp(key, "tls")) {
            if (!strcmp(val, "insecure"))
                n->tls = POLL_TLS_INSECURE;
            else {
                bool b;
                if (parse_bool(val, &b) < 0) {
                    line_error(c, "tls=%s: expected yes, no or insecure", val);
                    return -1;
                }
                n->tls = b ? POLL_TLS_YES : POLL_TLS_NO;
            }
            tls_word = val;
            continue;
        } else if (!strcmp(key, "follow_redirects")) {
            bool b;
            if (!strcmp(val, "same-host"))
                n->redirects = POLL_REDIRECT_SAME_HOST;
            else if (parse_bool(val, &b) == 0)
                n->redirects = b ? POLL_REDIRECT_YES : POLL_REDIRECT_NO;
            else {
                line_error(c, "follow_redirects=%s: expected no, same-host or yes", val);
                return -1;
            }
            continue;
        } else if (!strcmp(key, "activate")) {
            if (parse_bool(val, &n->activate) < 0) {
                line_error(c, "activate=%s: expected yes or no", val);
                return -1;
            }
            continue;
        } else {
            const char *near = near_option(key);
            if (near) {
                if (c->flags & (POLL_NODELIST_CHECK | POLL_NODELIST_STRICT)) {
                    line_error(c, "unknown option \"%s\" (did you mean %s=?)", key, near);
                    return -1;
                }
                line_warning(c, "unknown option \"%s\" ignored (did you mean %s=?)", key, near);
                continue;
            }
            if (n->nlabels >= NODELIST_MAX_LABELS) {
                line_error(c, "too many labels (at most %u)", NODELIST_MAX_LABELS);
                return -1;
            }
            for (size_t k = 0; k < n->nlabels; k++)
                if (!strcmp(n->labels[k].key, key)) {
                    line_error(c, "label \"%s\" given twice", key);
                    return -1;
                }
            if (!n->labels)
                n->labels = hp_xcalloc(NODELIST_MAX_LABELS, sizeof(*n->labels));
            n->labels[n->nlabels].key = hp_xstrdup(key);
            n->labels[n->nlabels].value = hp_xstrdup(val);
            n->nlabels++;
            continue;
        }
        if (*slot) {
            line_error(c, "option %s= given twice", key);
            return -1;
        }
        if (*val == '\0') {
            line_error(c, "option %s= has an empty value", key);
            return -1;
        }
        if (is_hostport && check_hostport(val, &why) < 0) {
            line_error(c, "%s=%s: %s (expected HOST:PORT)", key, val, why);
            return -1;
        }
        size_t at;
        if (slot == &n->name && hp_name_check(val, strlen(val), &at) < 0) {
            line_error(c,
                       "name=: byte %zu (0x%02x) is not allowed (expected 1 to %d letters, "
                       "digits and ._:-)",
                       at + 1, at < strlen(val) ? (unsigned char)val[at] : 0, HP_NAME_MAX);
            return -1;
        }
        if ((slot == &n->ca_file || slot == &n->cert_file || slot == &n->key_file) &&
            check_readable(val, &why) < 0) {
            line_error(c, "%s=%s: cannot read it: %s", key, val, why);
            return -1;
        }
        *slot = hp_xstrdup(val);
    }
    if (n->kind == POLL_KIND_URL && url_take_userinfo(c, n) < 0)
        return -1;
    if (!n->name)
        n->name = poll_kind_is_fe(n->kind) ? hp_xstrdup("fe") : derive_name(n);
    if (n->key_file && !n->cert_file) {
        line_error(c, "key_file= without cert_file=");
        return -1;
    }
    if ((n->ca_file || n->cert_file) && n->kind != POLL_KIND_URL) {
        if (n->tls == POLL_TLS_NO && tls_word) {
            line_error(c, "ca_file=/cert_file= need TLS, but the line says tls=%s", tls_word);
            return -1;
        }
        if (!tls_word)
            n->tls = POLL_TLS_YES;
    }
    if (n->delete_after_fetch && n->kind != POLL_KIND_DORIS && n->kind != POLL_KIND_DORIS_FE) {
        line_error(c, "delete_after_fetch= is for doris nodes (the agent serves their dump files)");
        return -1;
    }
    if (n->agent_port && !poll_kind_is_fe(n->kind)) {
        line_error(c, "agent_port= is for FE lines; a node names its agent with agent=HOST:PORT");
        return -1;
    }
    if (n->kind == POLL_KIND_DORIS && !n->agent) {
        /* /jeheap/dump leaves the dump on the BE host: without an agent no
         * byte of it can be fetched. */
        if (c->flags & (POLL_NODELIST_CHECK | POLL_NODELIST_STRICT)) {
            line_error(c, "doris node \"%s\" has no agent= (Doris writes dumps on the BE host; "
                          "the heapfleet agent there serves them: add agent=HOST:PORT)",
                       n->name);
            return -1;
        }
        line_warning(c, "doris node \"%s\" has no agent=: its dumps cannot be fetched", n->name);
    }
    if (n->kind == POLL_KIND_DORIS_FE && !n->agent_port) {
        if (c->flags & (POLL_NODELIST_CHECK | POLL_NODELIST_STRICT)) {
            line_error(c, "doris-fe line has no agent_port= (Doris writes dumps on each BE host; "
                          "the heapfleet agent there serves them)");
            return -1;
        }
        line_warning(c, "doris-fe line has no agent_port=: the backends' dumps cannot be fetched");
    }
    if (n->delete_after_fetch && !n->agent && !n->agent_port) {
        line_error(c, "delete_after_fetch=yes needs the agent (agent= or agent_port=)");
        return -1;
    }
    if (n->kind == POLL_KIND_URL && tls_word) {
        line_error(c, "tls= does not apply to url nodes (the URL's scheme decides)");
        return -1;
    }
    if (n->kind == POLL_KIND_AGENT && !n->agent)
        n->agent = hp_xstrdup(n->addr); /* the address is the agent itself */
    if (n->activate && n->kind != POLL_KIND_DORIS) {
        line_error(c,
                   "activate=yes is only possible for doris nodes (%s has no HTTP switch; "
                   "start it with prof_active:true)",
                   poll_kind_name(n->kind));
        return -1;
    }
    if (n->password_file && n->password) {
        line_error(c, "a password both in the URL and in password_file=: keep one");
        return -1;
    }
    if (n->password_file && !n->user) {
        line_error(c, "password_file= without user=");
        return -1;
    }
    if (n->token_file) {
        /* The agent's bearer token: its first line, like the agent reads it. */
        struct hp_buf why_buf = HP_BUF_INIT(0);
        if (read_password(n->token_file, &n->token, &why_buf) < 0) {
            line_error(c, "token_file: %s", why_buf.data ? why_buf.data : "unreadable");
            hp_buf_release(&why_buf);
            return -1;
        }
        hp_buf_release(&why_buf);
    }
    if (n->password_file) {
        struct hp_buf why_buf = HP_BUF_INIT(0);
        if (read_password(n->password_file, &n->password, &why_buf) < 0) {
            line_error(c, "password_file: %s", why_buf.data ? why_buf.data : "unreadable");
            hp_buf_release(&why_buf);
            return -1;
        }
        hp_buf_release(&why_buf);
    }
    return 0;
}

int poll_nodelist_parse(const char *text, size_t len, const char *source, unsigned flags,
                        struct poll_nodelist **ret, size_t *ret_bad, struct hp_buf *err)
{
    int r = 0;
    size_t bad = 0, cap = 0;
    struct poll_nodelist *l = hp_xcalloc(1, sizeof(*l));
    struct parse_ctx c = {.source = source ? source : "nodes", .line = 0, .flags = flags, .err = err};
    char *line = NULL;
    size_t pos = 0;
    while (pos < len) {
        const char *start = text + pos;
        const char *nl = memchr(start, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - start) : len - pos;
        pos += n + (nl ? 1 : 0);
        c.line++;
        if (n > NODELIST_MAX_LINE) {
            line_error(&c, "line is %zu bytes, over the limit of %u", n, NODELIST_MAX_LINE);
            bad++;
            continue;
        }
        free(line);
        line = hp_xstrndup(start, n);
        if (memchr(start, '\0', n)) {
            line_error(&c, "NUL byte in line (is this a text file?)");
            bad++;
            continue;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        size_t ll = strlen(line);
        while (ll && (line[ll - 1] == '\r' || isspace((unsigned char)line[ll - 1])))
            line[--ll] = '\0';
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (!*p)
            continue;
        struct poll_node node = {0};
        node.line = c.line;
        if (parse_line(&c, p, &node) < 0) {
            struct poll_node *tmp = hp_xcalloc(1, sizeof(*tmp));
            *tmp = node;
            poll_node_free(tmp);
            bad++;
            continue;
        }
        bool dup = false;
        for (size_t k = 0; k < l->n; k++)
            if (!strcmp(l->nodes[k].name, node.name)) {
                line_error(&c, "node name \"%s\" already used on line %u (add name=...)", node.name,
                           l->nodes[k].line);
                dup = true;
                break;
            }
        if (!dup && l->n >= NODELIST_MAX_NODES) {
            line_error(&c, "more than %u nodes", NODELIST_MAX_NODES);
            dup = true;
        }
        if (dup) {
            struct poll_node *tmp = hp_xcalloc(1, sizeof(*tmp));
            *tmp = node;
            poll_node_free(tmp);
            bad++;
            continue;
        }
        l->nodes = hp_xgrow(l->nodes, &cap, l->n + 1, sizeof(*l->nodes));
        l->nodes[l->n++] = node;
    }
    if (bad && (flags & POLL_NODELIST_STRICT)) {
        r = HP_EPARSE;
        goto out;
    }
    l->warnings = c.warnings;
    *ret = l;
    l = NULL;
    if (ret_bad)
        *ret_bad = bad;
out:
    free(line);
    poll_nodelist_free(l);
    return r;
}

int poll_nodelist_load(const char *path, unsigned flags, struct poll_nodelist **ret,
                       size_t *ret_bad, struct hp_buf *err)
{
    char *data = NULL;
    size_t len = 0;
    int r = hp_file_read(path, NODELIST_MAX_FILE, &data, &len, err);
    if (r < 0)
        return r;
    r = poll_nodelist_parse(data, len, path, flags, ret, ret_bad, err);
    free(data);
    return r;
}
