/* cuda_dmabuf_write: stock libibverbs' ibv_reg_dmabuf_mr on CUDA device memory, then
 * RDMA WRITE, READ, SEND, FETCH_AND_ADD and an inline WRITE on it from another QP, each
 * checked by copying the GPU bytes back with cuMemcpyDtoH.
 *
 * Runs under libdoorbell_preload.so (the device is softhca0, libibverbs + libmlx5 are
 * rdma-core's own), which installs gdr's CUDA resolver: the dma-buf, exported the way
 * perftest and NCCL export one (cuMemGetHandleForAddressRange(DMA_BUF_FD) on the
 * allocation, registered with iova = the device address of byte `offset` of it), cannot
 * be CPU-mapped, so softhca reaches its bytes with CUDA copies at that device address.
 * Built and run by tests/stock_dmabuf.rs; on a GPU machine without rdma-core by
 * gdr/tools/stock-cuda-check.sh. The shared verbs parts are in rc_pair.h.
 *
 * The CUDA driver API is loaded with dlopen("libcuda.so.1"), with the few prototypes
 * declared here (CUDA 12/13 ABI), so the program builds without CUDA headers and, on a
 * machine without the driver, prints "SKIP: no libcuda.so.1" and exits 77 (after
 * softhca0 was opened and NCCL's probe made, so the verbs half is exercised anyway).
 *
 * One process, one device, two RC QPs connected to each other: QP "a" works from host
 * memory on the GPU MR that QP "b"'s side owns. Prints "USING <path>" for each rdma-core
 * library it runs on, then one "CHECK <name> PASS|FAIL <why>" line per check; exits 0
 * only when all passed, 2 on a setup failure, 77 on a SKIP.
 *
 * The checks:
 *   nccl_probe    ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0) fails with EBADF (NCCL's
 *                 ncclIbDmaBufSupport: "this NIC supports dma-buf")
 *   register      ibv_reg_dmabuf_mr of 32 KiB at offset 4 KiB of a 64 KiB cuMemAlloc
 *                 buffer's dma-buf, iova = device pointer + 4 KiB
 *   write         RDMA WRITE of 10000 bytes at iova + 3000: those bytes in GPU memory,
 *                 no other byte of the 64 KiB changed
 *   read          RDMA READ of 4000 bytes of the GPU MR into host memory
 *   send          SEND of 3000 bytes into a receive buffer in GPU memory
 *   fetch_add     FETCH_AND_ADD 5 on a GPU word set to 1000: 1000 back, 1005 in place
 *   inline_write  RDMA WRITE of 48 bytes with IBV_SEND_INLINE into GPU memory
 *   oob_write     RDMA WRITE crossing the MR's end: IBV_WC_REM_ACCESS_ERR, and every
 *                 GPU byte unchanged
 *   bad_rkey      RDMA WRITE (from a fresh QP pair) inside the MR with the rkey's key
 *                 byte wrong: IBV_WC_REM_ACCESS_ERR, every GPU byte unchanged
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "rc_pair.h"

#define BUF (64 * 1024) /* one GPU page (perftest's ACCEL_PAGE_SIZE) */
#define MR_OFF 4096
#define MR_LEN (32 * 1024)

/* The CUDA driver ABI this program uses (cuda.h of CUDA 12 and 13). */
typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef unsigned long long CUdeviceptr;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_NO_DEVICE 100
#define CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD 1
#define CU_POINTER_ATTRIBUTE_SYNC_MEMOPS 6

static struct {
	CUresult (*init)(unsigned);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*primary_retain)(CUcontext *, CUdevice);
	CUresult (*primary_release)(CUdevice);
	CUresult (*ctx_set_current)(CUcontext);
	CUresult (*mem_alloc)(CUdeviceptr *, size_t);
	CUresult (*mem_free)(CUdeviceptr);
	CUresult (*htod)(CUdeviceptr, const void *, size_t);
	CUresult (*dtoh)(void *, CUdeviceptr, size_t);
	CUresult (*range_handle)(void *, CUdeviceptr, size_t, int, unsigned long long);
	CUresult (*pointer_set)(const void *, int, CUdeviceptr);
	CUresult (*error_name)(CUresult, const char **);
} cu;

/* Loads libcuda.so.1 and the calls above; prints the SKIP line and exits 77 without it. */
static void cuda_load(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("SKIP: no libcuda.so.1 (%s)\n", dlerror());
		exit(77);
	}
	struct {
		const char *name;
		void **slot;
	} syms[] = {
		{ "cuInit", (void **)&cu.init },
		{ "cuDeviceGet", (void **)&cu.device_get },
		{ "cuDevicePrimaryCtxRetain", (void **)&cu.primary_retain },
		{ "cuDevicePrimaryCtxRelease_v2", (void **)&cu.primary_release },
		{ "cuCtxSetCurrent", (void **)&cu.ctx_set_current },
		{ "cuMemAlloc_v2", (void **)&cu.mem_alloc },
		{ "cuMemFree_v2", (void **)&cu.mem_free },
		{ "cuMemcpyHtoD_v2", (void **)&cu.htod },
		{ "cuMemcpyDtoH_v2", (void **)&cu.dtoh },
		{ "cuMemGetHandleForAddressRange", (void **)&cu.range_handle },
		{ "cuPointerSetAttribute", (void **)&cu.pointer_set },
		{ "cuGetErrorName", (void **)&cu.error_name },
	};
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		*syms[i].slot = dlsym(h, syms[i].name);
		if (!*syms[i].slot) {
			printf("SETUP FAIL libcuda.so.1 has no %s (driver older than CUDA 11.7?)\n", syms[i].name);
			exit(2);
		}
	}
}

/* Dies with the CUDA error's name when r is not CUDA_SUCCESS. */
static void cu_ok(CUresult r, const char *what)
{
	if (r == CUDA_SUCCESS)
		return;
	const char *name = NULL;
	if (cu.error_name(r, &name) != CUDA_SUCCESS || !name)
		name = "unknown";
	printf("SETUP FAIL %s: CUDA error %d (%s)\n", what, r, name);
	exit(2);
}

/* Copies the whole GPU buffer to host memory. */
static void gpu_snapshot(CUdeviceptr d, uint8_t *host)
{
	cu_ok(cu.dtoh(host, d, BUF), "cuMemcpyDtoH");
}

/* dl_iterate_phdr callback: prints the path of every rdma-core library (and libnl) loaded, so a run
 * shows which libibverbs and which provider it used. */
static int print_rdma_lib(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	const char *n = info->dlpi_name;
	if (n && (strstr(n, "libibverbs.so") || strstr(n, "mlx5") || strstr(n, "libnl")))
		printf("USING %s\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	int ordinal = argc > 1 ? atoi(argv[1]) : 0;
	struct rc_pair p;
	rc_pair_open(&p);
	dl_iterate_phdr(print_rdma_lib, NULL);
	fflush(stdout);

	errno = 0;
	struct ibv_mr *probe = ibv_reg_dmabuf_mr(p.pd, 0, 0, 0, -1, 0);
	char why[160];
	snprintf(why, sizeof(why), "returned %p, errno %d (%s), expected EBADF", (void *)probe, errno, strerror(errno));
	check("nccl_probe", probe == NULL && errno == EBADF, why);

	cuda_load();
	CUresult r = cu.init(0);
	if (r == CUDA_ERROR_NO_DEVICE) {
		printf("SKIP: libcuda.so.1 loaded but cuInit found no CUDA device\n");
		return 77;
	}
	cu_ok(r, "cuInit");
	CUdevice dev;
	CUcontext cctx;
	cu_ok(cu.device_get(&dev, ordinal), "cuDeviceGet");
	cu_ok(cu.primary_retain(&cctx, dev), "cuDevicePrimaryCtxRetain");
	cu_ok(cu.ctx_set_current(cctx), "cuCtxSetCurrent");

	/* 64 KiB of device memory, SYNC_MEMOPS set as perftest sets it, filled with a
	 * pattern; exported whole (cuMemAlloc returns at least host-page-aligned memory,
	 * which the export requires: checked). */
	CUdeviceptr d = 0;
	cu_ok(cu.mem_alloc(&d, BUF), "cuMemAlloc");
	unsigned one = 1;
	cu_ok(cu.pointer_set(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, d), "cuPointerSetAttribute(SYNC_MEMOPS)");
	if (d % (CUdeviceptr)sysconf(_SC_PAGESIZE)) {
		errno = EINVAL;
		die("cuMemAlloc returned memory that is not host-page aligned");
	}
	uint8_t *gpu = malloc(BUF), *before = malloc(BUF), *want = malloc(BUF);
	for (int i = 0; i < BUF; i++)
		want[i] = (uint8_t)(i * 7 + 1);
	cu_ok(cu.htod(d, want, BUF), "cuMemcpyHtoD");
	int fd = -1;
	cu_ok(cu.range_handle(&fd, d, BUF, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
	      "cuMemGetHandleForAddressRange(DMA_BUF_FD)");
	printf("GPU %d: buffer 0x%llx, %d bytes, dma-buf fd %d\n", ordinal, d, BUF, fd);

	/* iova = the device address of the MR's first byte (dma-buf offset MR_OFF). */
	const uint64_t iova = d + MR_OFF;
	errno = 0;
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(p.pd, MR_OFF, MR_LEN, iova, fd, RC_ACCESS);
	snprintf(why, sizeof(why), "ibv_reg_dmabuf_mr(offset %d, len %d, iova 0x%llx, fd %d): %s", MR_OFF, MR_LEN,
		 (unsigned long long)iova, fd, strerror(errno));
	check("register", mr != NULL, why);
	if (!mr)
		return 1;

	uint8_t *src = aligned_alloc(4096, MR_LEN);
	for (int i = 0; i < MR_LEN; i++)
		src[i] = (uint8_t)(i * 13 + 5);
	struct ibv_mr *smr = ibv_reg_mr(p.pd, src, MR_LEN, RC_ACCESS);
	if (!smr)
		die("ibv_reg_mr");
	rc_pair_connect(&p);

	/* WRITE 10000 bytes at iova + 3000. */
	gpu_snapshot(d, before);
	int st = write_wait(p.qa, p.cqa, smr, 10000, iova + 3000, mr->rkey);
	memcpy(want, before, BUF);
	memcpy(want + MR_OFF + 3000, src, 10000);
	gpu_snapshot(d, gpu);
	int same = memcmp(gpu, want, BUF) == 0;
	snprintf(why, sizeof(why), "status %s, GPU bytes %s", ibv_wc_status_str(st), same ? "as expected" : "differ");
	check("write", st == IBV_WC_SUCCESS && same, why);

	/* READ 4000 bytes at iova + 5000 into host memory. */
	st = post_wait(p.qa, p.cqa, IBV_WR_RDMA_READ, (uintptr_t)src + 16384, 4000, smr->lkey, iova + 5000, mr->rkey, 0);
	gpu_snapshot(d, gpu);
	same = memcmp(src + 16384, gpu + MR_OFF + 5000, 4000) == 0;
	snprintf(why, sizeof(why), "status %s, bytes %s", ibv_wc_status_str(st), same ? "as in GPU memory" : "differ");
	check("read", st == IBV_WC_SUCCESS && same, why);

	/* SEND 3000 bytes into a receive buffer at iova + 20000 (the SGE names it by iova). */
	struct ibv_sge rsge = { .addr = iova + 20000, .length = 4096, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 9, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	if (ibv_post_recv(p.qb, &rwr, &rbad))
		die("ibv_post_recv");
	st = post_wait(p.qa, p.cqa, IBV_WR_SEND, (uintptr_t)src + 100, 3000, smr->lkey, 0, 0, 0);
	struct ibv_wc rwc = wait_one(p.cqb);
	gpu_snapshot(d, gpu);
	same = memcmp(gpu + MR_OFF + 20000, src + 100, 3000) == 0;
	snprintf(why, sizeof(why), "send %s, receive %s (%u bytes), GPU bytes %s", ibv_wc_status_str(st),
		 ibv_wc_status_str(rwc.status), rwc.byte_len, same ? "as sent" : "differ");
	check("send", st == IBV_WC_SUCCESS && rwc.status == IBV_WC_SUCCESS && rwc.byte_len == 3000 && same, why);

	/* FETCH_AND_ADD 5 on the GPU word at iova + 256, set to 1000. */
	uint64_t word = 1000, old, now;
	cu_ok(cu.htod(iova + 256, &word, 8), "cuMemcpyHtoD");
	st = post_wait(p.qa, p.cqa, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)src + 30000, 8, smr->lkey, iova + 256, mr->rkey, 5);
	memcpy(&old, src + 30000, 8);
	cu_ok(cu.dtoh(&now, iova + 256, 8), "cuMemcpyDtoH");
	snprintf(why, sizeof(why), "status %s, returned %llu, GPU word now %llu (expected 1000, 1005)", ibv_wc_status_str(st),
		 (unsigned long long)old, (unsigned long long)now);
	check("fetch_add", st == IBV_WC_SUCCESS && old == 1000 && now == 1005, why);

	/* An inline WRITE: the 48 bytes travel in the WQE, not through the lkey. */
	uint8_t small[48];
	for (int i = 0; i < 48; i++)
		small[i] = (uint8_t)(0xa0 + i);
	gpu_snapshot(d, before);
	st = post_wait_flags(p.qa, p.cqa, IBV_WR_RDMA_WRITE, (uintptr_t)small, sizeof(small), 0, iova + MR_LEN - 48,
			     mr->rkey, 0, IBV_SEND_INLINE);
	memcpy(want, before, BUF);
	memcpy(want + MR_OFF + MR_LEN - 48, small, sizeof(small));
	gpu_snapshot(d, gpu);
	same = memcmp(gpu, want, BUF) == 0;
	snprintf(why, sizeof(why), "status %s, GPU bytes %s", ibv_wc_status_str(st), same ? "as expected" : "differ");
	check("inline_write", st == IBV_WC_SUCCESS && same, why);

	/* 64 bytes, the last 32 past the MR's end (into GPU memory the dma-buf holds but the
	 * MR does not): refused, no GPU byte written. The QP ends in the error state. */
	gpu_snapshot(d, before);
	for (int i = 0; i < 64; i++)
		src[i] = 0xee;
	st = write_wait(p.qa, p.cqa, smr, 64, iova + MR_LEN - 32, mr->rkey);
	gpu_snapshot(d, gpu);
	same = memcmp(gpu, before, BUF) == 0;
	snprintf(why, sizeof(why), "status %s, GPU bytes %s", ibv_wc_status_str(st), same ? "unchanged" : "CHANGED");
	check("oob_write", st == IBV_WC_REM_ACCESS_ERR && same, why);

	/* A fresh pair, and a WRITE inside the MR with the rkey's low byte (the key an mlx5
	 * MR key carries beside its index) changed: refused, no GPU byte written. */
	rc_pair_reconnect(&p);
	st = write_wait(p.qa, p.cqa, smr, 64, iova + 1000, (mr->rkey & ~0xffu) | ((mr->rkey + 1) & 0xffu));
	gpu_snapshot(d, gpu);
	same = memcmp(gpu, before, BUF) == 0;
	snprintf(why, sizeof(why), "status %s, GPU bytes %s", ibv_wc_status_str(st), same ? "unchanged" : "CHANGED");
	check("bad_rkey", st == IBV_WC_REM_ACCESS_ERR && same, why);

	ibv_dereg_mr(smr);
	ibv_dereg_mr(mr);
	rc_pair_close(&p);
	close(fd);
	cu.mem_free(d);
	cu.primary_release(dev);
	return failures ? 1 : 0;
}
