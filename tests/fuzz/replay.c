/* Replays fuzz corpora as an ordinary test when libFuzzer is not available
 * (gcc builds): every file named on the command line, or found directly in a
 * folder named there, is fed to LLVMFuzzerTestOneInput once. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/hp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path, int *count)
{
    char *data;
    size_t len;
    struct hp_buf err = HP_BUF_INIT(0);
    if (hp_file_read(path, (size_t)64 << 20, &data, &len, &err) < 0) {
        fprintf(stderr, "replay: %s\n", err.data);
        hp_buf_release(&err);
        return 1;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)data, len);
    free(data);
    (*count)++;
    return 0;
}

int main(int argc, char **argv)
{
    int count = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: %s: no such file or folder\n", argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad |= replay_file(argv[i], &count);
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char *p = hp_xasprintf("%s/%s", argv[i], e->d_name);
            bad |= replay_file(p, &count);
            free(p);
        }
        if (d)
            closedir(d);
    }
    printf("replayed %d inputs\n", count);
    return bad || count == 0;
}
