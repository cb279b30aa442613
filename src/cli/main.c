/* main.c - the `needle` command: dispatch to one subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "needle.h"


static const struct {
    const char *name;
    nd_cli_fn fn;
    const char *help;
} commands[] = {
    {"run", cmd_run, "answer a request with tool calls (prints the JSON envelope)"},
    {"serve", cmd_serve, "an OpenAI-compatible tool-calling HTTP server with a playground page"},
    {"finetune", cmd_finetune, "LoRA or full fine-tuning on a JSONL dataset"},
    {"build", cmd_build, "merge + quantise a checkpoint into a .cact deploy file"},
    {"init", cmd_init, "write a randomly initialised checkpoint (.safetensors)"},
    {"inspect", cmd_inspect, "show the geometry and tensors of a .cact or .safetensors"},
    {"info", cmd_info, "backends built in, the one in use and why, threads, CPU features"},
    {"tokenize", cmd_tokenize, "encode text to ids (or --decode ids to text)"},
    {"embed", cmd_embed, "a text's L2-normalised embedding from the model's embedding head"},
    {"logits", cmd_logits, "run the forward pass on ids and print logits as JSON"},
    {"bench", cmd_bench, "measure load time, prefill and decode tokens/s, peak memory"},
    {"eval", cmd_eval, "score a model on a JSONL test set"},
    {"train-heads", cmd_train_heads, "calibrate the confidence head, train the tool-retrieval head"},
    {"generate-data", cmd_generate_data, "training data for your own tools file (runs tools/generate_data.py)"},
};

static void usage(FILE *to)
{
    fprintf(to, "needle %s - run, fine-tune and export Needle tool-calling models\n\nusage: needle COMMAND [options]\n\n",
            NEEDLE_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(to, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(to, "\n`needle COMMAND --help` describes each command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("needle %s\n", NEEDLE_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (strcmp(argv[1], commands[i].name) != 0) continue;
        return commands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "needle: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
