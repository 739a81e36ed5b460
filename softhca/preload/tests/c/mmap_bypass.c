/* mmap_bypass: stock libibverbs + libmlx5 on softhca0 in a program whose mmap never
 * reaches libdoorbell_preload.so, the way UCX's bistro hooks (or a direct
 * syscall(SYS_mmap, ...)) bypass every LD_PRELOAD definition of mmap.
 *
 * The program defines mmap and mmap64 itself (built with -rdynamic, so the dynamic linker
 * binds libmlx5's calls to them: an executable's definitions come before the preloaded
 * library's) and forwards each one to syscall(SYS_mmap). libmlx5's mappings of its UAR
 * pages and of the clock page are therefore made on the uverbs fd (the device page memfd
 * under the preload) without softhca's kernel half seeing them; the doorbell trap has to
 * find them itself. Built and run by tests/mmap_bypass.rs; the verbs parts are in
 * rc_pair.h.
 *
 * Between checks the program sleeps 100 ms (1.5 s before the first: longer than the
 * engine keeps waking up to look for expected mappings, softhca's trap_scan::GIVE_UP),
 * so the engine is idle with its trap armed when the next doorbell is rung: a doorbell
 * on a mapping the trap never protected would never be seen, and the completion would
 * never come (rc_pair.h's wait_one then exits 2).
 *
 * Prints one "CHECK <name> PASS|FAIL <why>" line per check; exits 0 only when all passed,
 * 2 on a setup failure (including a completion that never came).
 *   hooked        libmlx5 mapped the uverbs fd through this program's mmap (at least the
 *                 UAR of the QPs' doorbells and the clock page: 2 calls or more)
 *   write_N       (N = 0..2) after idleness, an RDMA WRITE of 4096 bytes from QP a into
 *                 b's buffer completes with IBV_WC_SUCCESS and the bytes arrived
 *   send          after idleness, a SEND of 100 bytes into a posted receive: both
 *                 completions successful, byte_len 100, the bytes arrived
 *   clock         after idleness, the free-running clock read through the clock page
 *                 (ibv_query_rt_values_ex, raw) advanced across a 50 ms sleep by at least
 *                 40 ms of the device's clock rate (hca_core_clock, kHz)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "rc_pair.h"

/* mmap calls made through this program's definitions, per fd (fds below 1024). */
static unsigned mmaps_on_fd[1024];

static void *forward(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	if (fd >= 0 && fd < 1024)
		__atomic_fetch_add(&mmaps_on_fd[fd], 1, __ATOMIC_RELAXED);
	/* The system call returns -errno; glibc's syscall() turns that into -1 (MAP_FAILED)
	 * and errno. */
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return forward(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return forward(addr, len, prot, flags, fd, off);
}

static void idle(void)
{
	usleep(100 * 1000);
}

static void long_idle(void)
{
	usleep(1500 * 1000);
}

int main(void)
{
	struct rc_pair p;
	rc_pair_open(&p);
	rc_pair_connect(&p);

	unsigned hooked = p.ctx->cmd_fd >= 0 && p.ctx->cmd_fd < 1024 ? mmaps_on_fd[p.ctx->cmd_fd] : 0;
	char why[128];
	snprintf(why, sizeof(why), "%u mmap calls on the uverbs fd came through the program's mmap", hooked);
	check("hooked", hooked >= 2, why);

	enum { LEN = 4096 };
	uint8_t *src = calloc(1, LEN), *dst = calloc(1, LEN);
	if (!src || !dst)
		die("calloc");
	struct ibv_mr *ms = ibv_reg_mr(p.pd, src, LEN, RC_ACCESS);
	struct ibv_mr *md = ibv_reg_mr(p.pd, dst, LEN, RC_ACCESS);
	if (!ms || !md)
		die("ibv_reg_mr");

	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < LEN; i++)
			src[i] = (uint8_t)(i * 7 + round * 31 + 1);
		if (round == 0)
			long_idle();
		else
			idle();
		int st = write_wait(p.qa, p.cqa, ms, LEN, (uintptr_t)dst, md->rkey);
		char name[16];
		snprintf(name, sizeof(name), "write_%d", round);
		snprintf(why, sizeof(why), "status %d (%s), bytes %s", st, ibv_wc_status_str(st),
			 memcmp(src, dst, LEN) ? "differ" : "equal");
		check(name, st == IBV_WC_SUCCESS && memcmp(src, dst, LEN) == 0, why);
	}

	/* SEND into a posted receive. */
	memset(dst, 0, LEN);
	struct ibv_sge rs = { .addr = (uintptr_t)dst, .length = LEN, .lkey = md->lkey };
	struct ibv_recv_wr rw = { .wr_id = 7, .sg_list = &rs, .num_sge = 1 }, *bad;
	if (ibv_post_recv(p.qb, &rw, &bad))
		die("ibv_post_recv");
	idle();
	int st = post_wait(p.qa, p.cqa, IBV_WR_SEND, (uintptr_t)src, 100, ms->lkey, 0, 0, 0);
	struct ibv_wc rwc = wait_one(p.cqb);
	snprintf(why, sizeof(why), "send %s, recv %s byte_len %u", ibv_wc_status_str(st),
		 ibv_wc_status_str(rwc.status), rwc.byte_len);
	check("send", st == IBV_WC_SUCCESS && rwc.status == IBV_WC_SUCCESS && rwc.byte_len == 100 &&
		      memcmp(src, dst, 100) == 0, why);

	/* The clock page, read after idleness. */
	struct ibv_device_attr_ex dx;
	if (ibv_query_device_ex(p.ctx, NULL, &dx))
		die("ibv_query_device_ex");
	struct ibv_values_ex v0 = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK }, v1 = v0;
	idle();
	if (ibv_query_rt_values_ex(p.ctx, &v0))
		die("ibv_query_rt_values_ex");
	usleep(50 * 1000);
	if (ibv_query_rt_values_ex(p.ctx, &v1))
		die("ibv_query_rt_values_ex");
	uint64_t c0 = (uint64_t)v0.raw_clock.tv_nsec, c1 = (uint64_t)v1.raw_clock.tv_nsec;
	double ms_moved = dx.hca_core_clock ? (double)(c1 - c0) / (double)dx.hca_core_clock : 0;
	snprintf(why, sizeof(why), "the clock moved %.1f ms across 50 ms (%llu -> %llu at %llu kHz)", ms_moved,
		 (unsigned long long)c0, (unsigned long long)c1, (unsigned long long)dx.hca_core_clock);
	check("clock", ms_moved >= 40.0 && ms_moved < 60000.0, why);

	ibv_dereg_mr(ms);
	ibv_dereg_mr(md);
	rc_pair_close(&p);
	free(src);
	free(dst);
	return failures ? 1 : 0;
}
