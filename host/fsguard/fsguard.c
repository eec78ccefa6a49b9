/* smol-fsguard PROGRAM [ARGS...]: runs PROGRAM (virtiofsd) under a seccomp filter that refuses, with EPERM,
 * every call that would give a host file a setuid or setgid bit or make a block or character device node.
 *
 * Why a filter and not virtiofsd's own options: a guest's chmod reaches the host as virtiofsd's fchmodat
 * on a file that the guest's root made and virtiofsd (root, or root of a user namespace) owns, and an owner
 * may set S_ISUID without any capability, so `-o modcaps=-fsetid` cannot stop it; C virtiofsd 7.2 has no
 * option that masks modes. Creation carries the mode too (FUSE_CREATE, FUSE_MKNOD: openat/mknodat), so
 * those are filtered as well. Only the mode argument is looked at: every other call, and these calls with
 * harmless modes, pass untouched. The filter survives exec and binds every thread virtiofsd starts, and a
 * seccomp filter can only be added to, never removed. docs/volumes.md, "Guarantees". */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "smol-fsguard knows the syscall ABI of x86_64 and aarch64 only"
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452 /* one number on every architecture (Linux 6.6); older headers lack it */
#endif

#define SETID (S_ISUID | S_ISGID)
/* The low 32 bits of argument n (mode_t is 32 bits; both ABIs here are little-endian). */
#define ARG(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#define LD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define DENY RET(SECCOMP_RET_ERRNO | EPERM)
#define ALLOW RET(SECCOMP_RET_ALLOW)
/* A call whose mode is argument n: refuse it with a setid bit. */
#define MODE_AT(nr, n) \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 4), LD(ARG(n)), \
  BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, SETID, 0, 1), DENY, ALLOW
/* mknod's mode argument n: refuse a setid bit, a block device or a character device; FIFOs, sockets and
 * regular files pass (a FIFO on the host is no more than a file a host reader would wait on). */
#define MKNOD_AT(nr, n) \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 7), LD(ARG(n)), \
  BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, SETID, 3, 0), \
  BPF_STMT(BPF_ALU | BPF_AND | BPF_K, S_IFMT), \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, S_IFBLK, 1, 0), \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, S_IFCHR, 0, 1), DENY, ALLOW

static struct sock_filter filter[] = {
  LD(offsetof(struct seccomp_data, arch)),
  /* another ABI's numbers mean other calls: refuse them all rather than guess */
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0), DENY,
  LD(offsetof(struct seccomp_data, nr)),
#if defined(__x86_64__)
  /* x32 calls share the ABI tag with bit 30 set in the number */
  BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1), DENY,
  MODE_AT(__NR_chmod, 1),
  MODE_AT(__NR_creat, 1),
  MODE_AT(__NR_open, 2),
  MKNOD_AT(__NR_mknod, 1),
#endif
  MODE_AT(__NR_fchmod, 1),
  MODE_AT(__NR_fchmodat, 2),
  MODE_AT(__NR_fchmodat2, 2),
  MODE_AT(__NR_openat, 3),
  MKNOD_AT(__NR_mknodat, 2),
  /* openat2 keeps its mode behind a pointer a filter cannot read; glibc's open never uses it */
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat2, 0, 1), RET(SECCOMP_RET_ERRNO | ENOSYS),
  ALLOW,
};

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: smol-fsguard PROGRAM [ARGS...]\n");
    return 64;
  }
  struct sock_fprog prog = { .len = sizeof filter / sizeof filter[0], .filter = filter };
  /* no_new_privs lets a process without CAP_SYS_ADMIN (smol as a plain user) install a filter */
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
    fprintf(stderr, "smol-fsguard: cannot install the seccomp filter: %s\n", strerror(errno));
    return 71;
  }
  execv(argv[1], argv + 1);
  fprintf(stderr, "smol-fsguard: cannot run %s: %s\n", argv[1], strerror(errno));
  return 127;
}
