/* cli.h - the needle command's subcommands, one file each (src/cli/cmd_*.c). */
#ifndef ND_CLI_H
#define ND_CLI_H

/* Every subcommand takes its own argv (argv[0] is the subcommand name) and
 * returns the process exit status: 0 ok, 1 failure, 2 usage error. */
typedef int (*nd_cli_fn)(int argc, char **argv);

int cmd_init(int argc, char **argv);
int cmd_build(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_finetune(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_train_heads(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_generate_data(int argc, char **argv);

/* Small shared helpers for argument parsing (cli_util.c). */
/* Returns the value for --name (either "--name V" or "--name=V"), advancing *i. */
const char *cli_flag_value(int argc, char **argv, int *i, const char *name);
/* Numbers in option values: cli_int / cli_double / cli_u64 (cli_options.h). */
/* Parse "1,2,3" into a heap array of ints; returns count or -1 on error. */
int cli_parse_int_list(const char *s, int **out);
/* models/NAME beside the executable's parent directory, else in the current
 * directory (heap string), or NULL when neither exists (cmd_run.c). */
char *cli_default_file(const char *name);
/* Print "needle NAME: message" to stderr and return 1. */
int cli_fail(const char *cmd, const char *msg);

#endif
