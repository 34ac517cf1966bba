/* Replays fuzz corpora through a LLVMFuzzerTestOneInput harness when the
 * build has no libFuzzer (gcc): `agent_replay_X DIR...` runs every file in
 * each DIR once. A crash or failed assert fails the test. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "store/hp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    size_t files = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "%s: cannot open corpus folder\n", argv[i]);
            return 1;
        }
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char *p = hp_xasprintf("%s/%s", argv[i], de->d_name);
            char *data = NULL;
            size_t len = 0;
            if (hp_file_read(p, 1u << 20, &data, &len, NULL) == 0) {
                LLVMFuzzerTestOneInput((const uint8_t *)data, len);
                files++;
            }
            free(data);
            free(p);
        }
        closedir(d);
    }
    printf("replayed %zu inputs\n", files);
    return files > 0 ? 0 : 1;
}
