/* Reset and fault handling for the bare-metal STM32F405 test harness (no vendor startup code). */
#include <stdint.h>
#include <string.h>

#include "semihost.h"

/* Defined by stm32f405.ld. */
extern uint32_t _estack, _sidata, _sdata, _edata, _sbss, _ebss;

int main(void);

#define CPACR (*(volatile uint32_t *)0xE000ED88u)

void reset_handler(void);
void fault_handler(void);

void reset_handler(void)
{
    /* CP10/CP11 full access: any FPU instruction before this is a UsageFault. Done first, before any
     * library code runs, since the hard-float multilib may use FPU registers anywhere. */
    CPACR |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    memcpy(&_sdata, &_sidata, (size_t)((char *)&_edata - (char *)&_sdata));
    memset(&_sbss, 0, (size_t)((char *)&_ebss - (char *)&_sbss));
    semihost_exit(main() == 0);
}

/* Any fault or unexpected interrupt ends the run with a failure instead of hanging until the timeout. */
void fault_handler(void)
{
    semihost_write0("FAULT\n");
    semihost_exit(0);
}

/* Cortex-M vector table: initial SP, then handlers. A struct keeps the SP a data pointer (ISO C has no
 * conversion between object and function pointers). */
struct vector_table {
    uint32_t *initial_sp;
    void (*handler[15])(void);
};

__attribute__((section(".isr_vector"), used)) static const struct vector_table vectors = {
    &_estack,
    {reset_handler, fault_handler, fault_handler, fault_handler, fault_handler, fault_handler, 0, 0, 0, 0,
     fault_handler, fault_handler, 0, fault_handler, fault_handler},
};
