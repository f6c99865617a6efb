/* ARM semihosting (bkpt 0xAB on M-profile): console output and exit through the debugger, here QEMU. */
#ifndef SEMIHOST_H
#define SEMIHOST_H

#define SEMIHOST_SYS_WRITE0 0x04
#define SEMIHOST_SYS_EXIT 0x18
#define SEMIHOST_APPLICATION_EXIT 0x20026 /* QEMU exits 0 for this reason code, 1 for any other */
#define SEMIHOST_RUNTIME_ERROR 0x20023

static inline int semihost_call(int op, const void *arg)
{
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xAB" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

/* Writes a NUL-terminated string to the host's stdout. */
static inline void semihost_write0(const char *s)
{
    semihost_call(SEMIHOST_SYS_WRITE0, s);
}

static inline void semihost_exit(int ok)
{
    /* AArch32 passes the reason code itself in r1, not a parameter block. */
    semihost_call(SEMIHOST_SYS_EXIT, (const void *)(ok ? SEMIHOST_APPLICATION_EXIT : SEMIHOST_RUNTIME_ERROR));
    for (;;) {
    }
}

#endif
