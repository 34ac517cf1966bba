/* Replays a fuzz target's seed corpus as an ordinary test when the build
 * has no libFuzzer (-Dfuzzing=false): every file named on the command line
 * (or in a directory named there) is fed to LLVMFuzzerTestOneInput once. */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/hp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int feed(const char *path)
{
    char *data = NULL;
    size_t len = 0;
    struct hp_buf err = HP_BUF_INIT(0);
    if (hp_file_read(path, 1u << 24, &data, &len, &err) < 0) {
        fprintf(stderr, "%s: %.*s\n", path, (int)err.len, err.data);
        hp_buf_release(&err);
        return 1;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)data, len);
    free(data);
    hp_buf_release(&err);
    return 0;
}

int main(int argc, char **argv)
{
    size_t n = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0)
            return 1;
        if (!S_ISDIR(st.st_mode)) {
            if (feed(argv[i]))
                return 1;
            n++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d)
            return 1;
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char *p = hp_xasprintf("%s/%s", argv[i], de->d_name);
            int r = feed(p);
            free(p);
            if (r) {
                closedir(d);
                return 1;
            }
            n++;
        }
        closedir(d);
    }
    printf("replayed %zu inputs\n", n);
    return n ? 0 : 1;
}
