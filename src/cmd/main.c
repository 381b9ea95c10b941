/* main.c - the nubo binary: dispatches to a subcommand. */
#include "cmd/cmd.h"
#include "cmd/trace.h"

#include <stdio.h>
#include <string.h>

static void usage(void)
{
    fputs("usage: nubo <command> [options]\n"
          "  aio --state-dir DIR --port PORT [--driver fake|libvirt] [--fake-hosts N]\n"
          "      [--demo-image FILE] [--set SECTION.KEY=VALUE ...]\n"
          "                               all-in-one cloud; a later start keeps it\n"
          "                               (admin password: NUBO_ADMIN_PASSWORD or\n"
          "                               --admin-password-file FILE; see aio --help)\n"
          "  serve --config FILE          control-plane roles\n"
          "  compute --config FILE [--fake-hosts N]  one hypervisor agent (or N fake hosts)\n"
          "  status --config FILE         every role and agent, up or down; see status --help\n"
          "  db sync|version --config FILE\n"
          "  doctor server <id> [--fix] --config FILE\n"
          "                               diagnose (and fix) a server; see doctor --help\n"
          "  doctor migration <id> [--to HOST] [--json]\n"
          "                               why a server can or cannot live-migrate, per host\n"
          "  doctor [cloud] [--json] [--fix] --config FILE\n"
          "                               the whole cloud's consistency (allocations,\n"
          "                               domains, migrations, services, ports); rollback\n"
          "                               <fix-id> undoes a fix\n"
          "  host drain <host> [--live] [--concurrency N] [--dry-run] --config FILE\n"
          "                               disable a host and move its servers off; see\n"
          "                               host --help\n"
          "  policy list [--json]         who may call each API route\n"
          "  trace <request-id> [--log [HOST=]PATH ...] [--json] --config FILE\n"
          "                               one request's timeline across roles and hosts\n",
          stderr);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage();
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "aio"))
        return nb_cmd_aio(argc - 2, argv + 2);
    if (!strcmp(cmd, "serve"))
        return nb_cmd_serve(argc - 2, argv + 2);
    if (!strcmp(cmd, "compute"))
        return nb_cmd_compute(argc - 2, argv + 2);
    if (!strcmp(cmd, "status"))
        return nb_cmd_status(argc - 2, argv + 2);
    if (!strcmp(cmd, "db"))
        return nb_cmd_db(argc - 2, argv + 2);
    if (!strcmp(cmd, "doctor"))
        return nb_cmd_doctor(argc - 2, argv + 2);
    if (!strcmp(cmd, "host"))
        return nb_cmd_host(argc - 2, argv + 2);
    if (!strcmp(cmd, "trace"))
        return nb_cmd_trace(argc - 2, argv + 2);
    if (!strcmp(cmd, "policy"))
        return nb_cmd_policy(argc - 2, argv + 2);
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage();
        return 0;
    }
    fprintf(stderr, "nubo: unknown command '%s'\n", cmd);
    usage();
    return 2;
}
