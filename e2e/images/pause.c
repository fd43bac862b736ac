/*
 * The pod sandbox's init process: it holds the pod's namespaces open, reaps
 * orphans that land on it and exits on SIGINT or SIGTERM. Built statically by
 * base.sh so the image needs nothing but this file (FROM scratch).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void Exit(int sig) {
  (void)sig;
  _exit(0);
}

static void Reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("allocguard-pause");
    return 0;
  }
  if (getpid() != 1) fprintf(stderr, "pause: warning: not running as PID 1\n");
  struct sigaction exit_action = {.sa_handler = Exit};
  struct sigaction reap_action = {.sa_handler = Reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &exit_action, NULL) < 0 || sigaction(SIGTERM, &exit_action, NULL) < 0 ||
      sigaction(SIGCHLD, &reap_action, NULL) < 0) {
    perror("pause: sigaction");
    return 1;
  }
  for (;;) pause();
}
