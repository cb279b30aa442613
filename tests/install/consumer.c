/* consumer.c - a program that knows needle only through its installed copy:
 * built by tests/cli/test_install.sh with `pkg-config --cflags --libs needle`
 * against PREFIX, it opens the model given on the command line, asks for the
 * README's request and prints the envelope. */
#include <stdio.h>

#include <needle.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: consumer MODEL.cact TOOLS_JSON\n");
        return 2;
    }
    needle_error err = {0};
    needle_model *m = NULL;
    needle_session *s = NULL;
    char *env = NULL;
    needle_session_options so = {.tools_json = argv[2]};
    if (needle_model_open(argv[1], NULL, NULL, &m, &err) != 0 || needle_session_open(m, &so, &s, &err) != 0 ||
        needle_session_send(s, "turn off the kitchen lights", &env, &err) != 0) {
        fprintf(stderr, "consumer: %s (%s)\n", err.message, needle_strerror(err.code));
        needle_session_close(s);
        needle_model_close(m);
        return 1;
    }
    printf("%s\n", env);
    needle_free(env);
    needle_session_close(s);
    needle_model_close(m);
    return 0;
}
