/*
 * Without libFuzzer: runs LLVMFuzzerTestOneInput on every file named on the
 * command line, or in the directories named, so seeds run in every build.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;

    if (f == NULL) {
        perror(path);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(n > 0 ? (size_t)n : 1);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return 1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            while (d != NULL && (e = readdir(d)) != NULL) {
                char path[4096];
                if (e->d_name[0] == '.') {
                    continue;
                }
                snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
                if (run_file(path) != 0) {
                    closedir(d);
                    return 1;
                }
                files++;
            }
            if (d != NULL) {
                closedir(d);
            }
        } else {
            if (run_file(argv[i]) != 0) {
                return 1;
            }
            files++;
        }
    }
    printf("replayed %d inputs\n", files);
    return files > 0 ? 0 : 1;
}
