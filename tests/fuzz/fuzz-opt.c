/* Fuzz target: the option parser (store/hp-opt.h). The input is split at
 * NUL bytes into argv; every value type is in the table. Whatever the
 * arguments, the parser returns a count of positionals no larger than argc
 * (and they are a subsequence of argv) or -1 with exit code 0 or 2. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/hp-opt.h"
#include "store/hp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int multi_cb(const struct hp_opt *o, const char *arg, struct hp_buf *err)
{
    if (arg[0] == 'x') {
        hp_err_printf(err, "no x");
        return HP_EUSAGE;
    }
    ++*(int *)o->value;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *buf = malloc(size + 1);
    char *argv[130], *orig[130];
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    int argc = 0;
    argv[argc++] = "fuzz";
    for (char *p = buf; p < buf + size + 1 && argc < 128; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;
    memcpy(orig, argv, sizeof(argv));
    bool b = false, f = true;
    const char *s = NULL;
    uint8_t u8 = 0;
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    double d = 0;
    int64_t dur = 0;
    int multi = 0;
    const struct hp_opt opts[] = {
        HP_OPT_BOOL('b', "bool", &b, "b"),
        HP_OPT_FLAG(0, "no-f", &f, 0, "f"),
        HP_OPT_STRING('s', "str", &s, "S", "s"),
        HP_OPT_UINT(0, "u8", &u8, 0, 255, "N", "u8"),
        HP_OPT_UINT(0, "u32", &u32, 1, 4e9, "N", "u32"),
        HP_OPT_UINT(0, "u64", &u64, 0, 1.8e19, "N", "u64"),
        HP_OPT_DOUBLE(0, "d", &d, -1, 1, "F", "d"),
        HP_OPT_CALLBACK(0, "dur", &dur, "D", "dur", hp_opt_duration_cb, hp_opt_duration_show),
        HP_OPT_GROUP("g"),
        HP_OPT_CALLBACK_F(0, "multi", &multi, "M", "m", multi_cb, NULL, HP_OPT_MULTI, 0),
        HP_OPT_END(),
    };
    static const struct hp_opt_usage u = { "fuzz", "fuzz [options]", "text\n", "after\n" };
    struct hp_buf msg = HP_BUF_INIT(0);
    int rc = -7;
    int n = hp_opt_parse(&u, opts, argc, argv, &msg, &rc);
    if (n < -1 || n >= argc || (n == -1 && rc != 0 && rc != 2) || (n == -1 && !msg.len))
        abort();
    /* Positionals keep their order and come from argv. */
    for (int i = 0, j = 1; i < n; i++, j++) {
        while (j < argc && orig[j] != argv[i])
            j++;
        if (j == argc)
            abort();
    }
    if (d < -1 || d > 1 || (u32 && u32 < 1))
        abort();
    hp_buf_release(&msg);
    free(buf);
    return 0;
}
