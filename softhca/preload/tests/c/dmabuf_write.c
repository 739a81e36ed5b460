/* dmabuf_write: stock libibverbs' ibv_reg_dmabuf_mr on a vgem dma-buf, then RDMA WRITE,
 * READ, SEND and FETCH_AND_ADD on it from another QP, checked through the CPU's own
 * mapping of the buffer.
 *
 * Built and run by tests/stock_dmabuf.rs inside the rxe guest of tests/vm/rxe-vm.sh (the
 * only place with vgem), under libdoorbell_preload.so, so the device is softhca0 and
 * libibverbs + libmlx5 are rdma-core's own. One process, one device, two RC QPs connected
 * to each other over the device's RoCE v2 GID (index 1): QP "a" writes from ordinary
 * memory into the dma-buf MR that QP "b"'s side owns. The verbs setup and reporting are
 * rc_pair.h's, shared with cuda_dmabuf_write.c (the same checks on CUDA memory).
 *
 * Prints one line per check, "CHECK <name> PASS" or "CHECK <name> FAIL <why>", and
 * exits 0 only when all passed (2 on a setup failure).
 *
 * The checks:
 *   nccl_probe  ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0) fails with EBADF, which is what
 *               NCCL's ncclIbDmaBufSupport takes as "this NIC supports dma-buf"
 *   register    ibv_reg_dmabuf_mr of 32 KiB at offset 4 KiB of a 64 KiB vgem buffer, with
 *               an iova that is no address of this process
 *   write       RDMA WRITE of 10000 bytes at iova + 3000: those bytes in the mapping, and
 *               no other byte of the buffer changed
 *   read        RDMA READ of 4000 bytes of the dma-buf MR into host memory
 *   send        SEND of 3000 bytes into a receive buffer in the dma-buf
 *   fetch_add   FETCH_AND_ADD on a word of the dma-buf: the old value back, the new in place
 *   inline_write  RDMA WRITE of 48 bytes with IBV_SEND_INLINE into the dma-buf
 *   oob_write   RDMA WRITE crossing the MR's end: IBV_WC_REM_ACCESS_ERR, buffer unchanged
 *   bad_rkey    RDMA WRITE (from a fresh QP pair) with the rkey's key byte wrong:
 *               IBV_WC_REM_ACCESS_ERR, buffer unchanged
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <drm.h>
#include <drm_mode.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"

#define BUF (64 * 1024)
#define MR_OFF 4096
#define MR_LEN (32 * 1024)
#define IOVA 0x7e0000000000ULL

/* The dma-buf fd of a new BUF-byte vgem dumb buffer. */
static int vgem_dmabuf(void)
{
	for (int i = 0; i < 16; i++) {
		char path[32], name[64] = { 0 };
		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		int fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct drm_version v = { .name_len = sizeof(name) - 1, .name = name };
		if (ioctl(fd, DRM_IOCTL_VERSION, &v) != 0 || strcmp(name, "vgem") != 0) {
			close(fd);
			continue;
		}
		struct drm_mode_create_dumb d = { .height = BUF / 4096, .width = 4096, .bpp = 8 };
		if (ioctl(fd, DRM_IOCTL_MODE_CREATE_DUMB, &d) != 0)
			die("DRM_IOCTL_MODE_CREATE_DUMB");
		struct drm_prime_handle p = { .handle = d.handle, .flags = DRM_CLOEXEC | DRM_RDWR, .fd = -1 };
		if (ioctl(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &p) != 0)
			die("DRM_IOCTL_PRIME_HANDLE_TO_FD");
		struct drm_gem_close c = { .handle = d.handle };
		ioctl(fd, DRM_IOCTL_GEM_CLOSE, &c);
		close(fd);
		return p.fd;
	}
	errno = ENODEV;
	die("no vgem device in /dev/dri");
	return -1;
}

int main(void)
{
	struct rc_pair p;
	rc_pair_open(&p);
	struct ibv_pd *pd = p.pd;

	errno = 0;
	struct ibv_mr *probe = ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
	char why[128];
	snprintf(why, sizeof(why), "returned %p, errno %d (%s), expected EBADF", (void *)probe, errno, strerror(errno));
	check("nccl_probe", probe == NULL && errno == EBADF, why);

	int fd = vgem_dmabuf();
	uint8_t *view = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (view == MAP_FAILED)
		die("mmap of the dma-buf");
	for (int i = 0; i < BUF; i++)
		view[i] = (uint8_t)(i * 7 + 1);
	int access = RC_ACCESS;
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(pd, MR_OFF, MR_LEN, IOVA, fd, access);
	snprintf(why, sizeof(why), "ibv_reg_dmabuf_mr: %s", strerror(errno));
	check("register", mr != NULL, why);
	if (!mr)
		return 1;

	uint8_t *src = aligned_alloc(4096, MR_LEN);
	for (int i = 0; i < MR_LEN; i++)
		src[i] = (uint8_t)(i * 13 + 5);
	struct ibv_mr *smr = ibv_reg_mr(pd, src, MR_LEN, access);
	if (!smr)
		die("ibv_reg_mr");

	rc_pair_connect(&p);
	struct ibv_qp *qa = p.qa, *qb = p.qb;
	struct ibv_cq *cqa = p.cqa, *cqb = p.cqb;

	uint8_t *before = malloc(BUF), *want = malloc(BUF);
	memcpy(before, view, BUF);
	int st = write_wait(qa, cqa, smr, 10000, IOVA + 3000, mr->rkey);
	memcpy(want, before, BUF);
	memcpy(want + MR_OFF + 3000, src, 10000);
	int same = memcmp(view, want, BUF) == 0;
	snprintf(why, sizeof(why), "status %s, buffer %s", ibv_wc_status_str(st), same ? "as expected" : "differs");
	check("write", st == IBV_WC_SUCCESS && same, why);

	/* READ 4000 bytes of the dma-buf MR into host memory. */
	st = post_wait(qa, cqa, IBV_WR_RDMA_READ, (uintptr_t)src + 16384, 4000, smr->lkey, IOVA + 5000, mr->rkey, 0);
	same = memcmp(src + 16384, view + MR_OFF + 5000, 4000) == 0;
	snprintf(why, sizeof(why), "status %s, bytes %s", ibv_wc_status_str(st), same ? "as in the buffer" : "differ");
	check("read", st == IBV_WC_SUCCESS && same, why);

	/* SEND 3000 bytes into a receive buffer in the dma-buf (the SGE names it by iova). */
	struct ibv_sge rsge = { .addr = IOVA + 20000, .length = 4096, .lkey = mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 9, .sg_list = &rsge, .num_sge = 1 }, *rbad;
	if (ibv_post_recv(qb, &rwr, &rbad))
		die("ibv_post_recv");
	st = post_wait(qa, cqa, IBV_WR_SEND, (uintptr_t)src + 100, 3000, smr->lkey, 0, 0, 0);
	struct ibv_wc rwc = wait_one(cqb);
	same = memcmp(view + MR_OFF + 20000, src + 100, 3000) == 0;
	snprintf(why, sizeof(why), "send %s, receive %s (%u bytes), buffer %s", ibv_wc_status_str(st),
		 ibv_wc_status_str(rwc.status), rwc.byte_len, same ? "as sent" : "differs");
	check("send", st == IBV_WC_SUCCESS && rwc.status == IBV_WC_SUCCESS && rwc.byte_len == 3000 && same, why);

	/* FETCH_AND_ADD 5 on a word of the dma-buf set to 1000. */
	uint64_t word = 1000;
	memcpy(view + MR_OFF + 256, &word, 8);
	st = post_wait(qa, cqa, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)src + 30000, 8, smr->lkey, IOVA + 256, mr->rkey, 5);
	uint64_t old, now;
	memcpy(&old, src + 30000, 8);
	memcpy(&now, view + MR_OFF + 256, 8);
	snprintf(why, sizeof(why), "status %s, returned %llu, word now %llu (expected 1000, 1005)", ibv_wc_status_str(st),
		 (unsigned long long)old, (unsigned long long)now);
	check("fetch_add", st == IBV_WC_SUCCESS && old == 1000 && now == 1005, why);

	/* An inline WRITE: the 48 bytes travel in the WQE, not through an lkey. */
	uint8_t small[48];
	for (int i = 0; i < 48; i++)
		small[i] = (uint8_t)(0xa0 + i);
	memcpy(before, view, BUF);
	st = post_wait_flags(qa, cqa, IBV_WR_RDMA_WRITE, (uintptr_t)small, sizeof(small), 0, IOVA + MR_LEN - 48, mr->rkey, 0,
			     IBV_SEND_INLINE);
	memcpy(want, before, BUF);
	memcpy(want + MR_OFF + MR_LEN - 48, small, sizeof(small));
	same = memcmp(view, want, BUF) == 0;
	snprintf(why, sizeof(why), "status %s, buffer %s", ibv_wc_status_str(st), same ? "as expected" : "differs");
	check("inline_write", st == IBV_WC_SUCCESS && same, why);

	/* 64 bytes, the last 32 past the MR's end: refused, nothing written. The QP ends in
	 * the error state. */
	memcpy(before, view, BUF);
	for (int i = 0; i < 64; i++)
		src[i] = 0xee;
	st = write_wait(qa, cqa, smr, 64, IOVA + MR_LEN - 32, mr->rkey);
	same = memcmp(view, before, BUF) == 0;
	snprintf(why, sizeof(why), "status %s, buffer %s", ibv_wc_status_str(st), same ? "unchanged" : "CHANGED");
	check("oob_write", st == IBV_WC_REM_ACCESS_ERR && same, why);

	/* A fresh pair, and a WRITE inside the MR with the rkey's low byte (the key an mlx5
	 * MR key carries beside its index) changed: refused, nothing written. */
	rc_pair_reconnect(&p);
	st = write_wait(p.qa, p.cqa, smr, 64, IOVA + 1000, (mr->rkey & ~0xffu) | ((mr->rkey + 1) & 0xffu));
	same = memcmp(view, before, BUF) == 0;
	snprintf(why, sizeof(why), "status %s, buffer %s", ibv_wc_status_str(st), same ? "unchanged" : "CHANGED");
	check("bad_rkey", st == IBV_WC_REM_ACCESS_ERR && same, why);

	ibv_dereg_mr(smr);
	ibv_dereg_mr(mr);
	munmap(view, BUF);
	close(fd);
	rc_pair_close(&p);
	return failures ? 1 : 0;
}
