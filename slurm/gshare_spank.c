/*
 * gshare_spank.so: the Slurm SPANK plugin that runs jobs under gshare.
 * docs/slurm.md is the administrator's guide; spank_rules.h holds what
 * the plugin decides, this file only carries it to and from Slurm.
 *
 * Where each part runs (Slurm calls a SPANK plugin in several processes):
 *   srun, sbatch, salloc (local and allocator context): the --gpu-* options
 *     are checked in their callback, so a bad value stops the submission
 *     with one message before the job is queued;
 *   slurmstepd (remote context): the options arrive again through their
 *     callback, and user_init, before the step's tasks are started, puts
 *     libgshare.so first in the job's LD_PRELOAD and sets its GSHARE_*
 *     variables, for a job that gave a --gpu-* option, or every job with
 *     all=1 in plugstack.conf.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/spank.h>

#include "slurm/spank_rules.h"

SPANK_PLUGIN(gshare, 1);

#ifndef GSHARE_SPANK_DEFAULT_LIB
#error "GSHARE_SPANK_DEFAULT_LIB: the installed path of libgshare.so (slurm/CMakeLists.txt)"
#endif

enum { kMaxOptions = 8, kMessageChars = 1024, kEnvironmentChars = 65536 };

static struct gshare_spank_config g_config;
/* Each option's value as given, or "" when not given. */
static char g_values[kMaxOptions][GSHARE_SPANK_TEXT_CHARS];
static int g_given[kMaxOptions];

static int on_option(int val, const char *optarg, int remote) {
  char error[kMessageChars];
  (void)remote;
  if (val < 0 || val >= kMaxOptions ||
      !gshare_spank_check_option((size_t)val, optarg, error, sizeof error)) {
    slurm_error("%s", error);
    return -1;
  }
  /* A valid value is shorter than the preload's own limit on it. */
  strncpy(g_values[val], optarg, sizeof g_values[val] - 1);
  g_values[val][sizeof g_values[val] - 1] = '\0';
  g_given[val] = 1;
  return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av) {
  char error[kMessageChars];
  size_t count = 0;
  const struct gshare_spank_option *options = gshare_spank_options(&count);
  spank_context_t context = spank_context();

  if (!gshare_spank_parse_config(ac, av, GSHARE_SPANK_DEFAULT_LIB, &g_config, error,
                                 sizeof error)) {
    slurm_error("%s", error);
    return -1;
  }
  /* Options exist where a job is submitted or started; the prolog,
   * epilog and slurmd itself have none. */
  if (context != S_CTX_LOCAL && context != S_CTX_ALLOCATOR && context != S_CTX_REMOTE)
    return 0;
  for (size_t i = 0; i < count && i < kMaxOptions; ++i) {
    struct spank_option option = {
        .name = (char *)options[i].name,
        .arginfo = (char *)options[i].arginfo,
        .usage = (char *)options[i].usage,
        .has_arg = 1,
        .val = (int)i,
        .cb = on_option,
    };
    spank_err_t rc = spank_option_register(sp, &option);
    if (rc != ESPANK_SUCCESS) {
      slurm_error("gshare: cannot register --%s: %s", options[i].name, spank_strerror(rc));
      return -1;
    }
  }
  return 0;
}

static int set_job_variable(spank_t sp, const char *name, const char *value) {
  spank_err_t rc = spank_setenv(sp, name, value, 1);
  if (rc == ESPANK_SUCCESS) return 0;
  slurm_error("gshare: cannot set %s in the job's environment: %s", name, spank_strerror(rc));
  return -1;
}

/* The library and the region directory must be there before the job
 * starts: a preload the loader cannot find is skipped with a warning, and
 * the job would then run without its quota. */
static int check_node(void) {
  struct stat st;
  if (access(g_config.lib, R_OK) != 0) {
    slurm_error("gshare: cannot read %s (plugstack.conf lib=) on this node: %s; the job "
                "would run without gshare's quota", g_config.lib, strerror(errno));
    return -1;
  }
  if (g_config.dir[0] != '\0' && (stat(g_config.dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
    slurm_error("gshare: the region directory %s (plugstack.conf dir=) is not a directory on "
                "this node", g_config.dir);
    return -1;
  }
  return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av) {
  size_t count = 0;
  const struct gshare_spank_option *options = gshare_spank_options(&count);
  int any_given = 0;
  (void)ac;
  (void)av;
  if (spank_remote(sp) != 1) return 0;
  for (size_t i = 0; i < count && i < kMaxOptions; ++i) any_given |= g_given[i];
  if (!any_given && !g_config.all) return 0;
  if (check_node() != 0) return -1;

  static char existing[kEnvironmentChars], preload[kEnvironmentChars];
  spank_err_t rc = spank_getenv(sp, "LD_PRELOAD", existing, sizeof existing);
  if (rc == ESPANK_ENV_NOEXIST) {
    existing[0] = '\0';
  } else if (rc != ESPANK_SUCCESS) {
    slurm_error("gshare: cannot read the job's LD_PRELOAD: %s", spank_strerror(rc));
    return -1;
  }
  if (!gshare_spank_preload(existing, g_config.lib, preload, sizeof preload)) {
    slurm_error("gshare: the job's LD_PRELOAD is too long to add %s", g_config.lib);
    return -1;
  }
  if (set_job_variable(sp, "LD_PRELOAD", preload) != 0) return -1;
  if (g_config.dir[0] != '\0' && set_job_variable(sp, "GSHARE_DIR", g_config.dir) != 0) return -1;
  if (g_config.group[0] != '\0' && set_job_variable(sp, "GSHARE_GROUP", g_config.group) != 0)
    return -1;
  for (size_t i = 0; i < count && i < kMaxOptions; ++i)
    if (g_given[i] && set_job_variable(sp, options[i].variable, g_values[i]) != 0) return -1;
  return 0;
}
