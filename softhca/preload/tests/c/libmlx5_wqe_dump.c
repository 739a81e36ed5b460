/*
 * Dumps the send WQEs that the installed libmlx5 writes, for golden-byte comparison
 * with doorbell's WQE builders (softhca/preload/tests/libmlx5_golden.rs).
 *
 * Runs on softhca under libdoorbell_preload.so (any mlx5 device would do). One RC QP
 * is connected to itself, so every work request really executes; that does not matter
 * for the bytes: the device only reads the send queue. For each case the program
 *   1. makes sure the send queue is idle (every earlier WQE completed),
 *   2. fills the WQE basic blocks the next WQE will occupy with FILL (0xa5), so that
 *      any byte libmlx5 leaves untouched shows up as FILL,
 *   3. posts one work request with ibv_post_send,
 *   4. prints the inputs and the WQE bytes (the control segment's DS count x 16,
 *      wrapping at the end of the queue) together with the doorbell record's SQ
 *      counter, then waits for the completion.
 * Filler RDMA WRITEs (not printed) move the producer index to the last basic block of
 * the queue for the cases that must wrap around its end.
 *
 * Output, one line per record, fields "key=value":
 *   qp qpn=N wqe_cnt=N stride=N max_inline=N fill=a5
 *   case name=S op=S qpn=N pi=N signaled=0|1 solicited=0|1 fence=0|1 inline=0|1
 *        imm=HEX raddr=HEX rkey=HEX compare=HEX swap=HEX add=HEX
 *        sges=ADDR:LEN:LKEY,...|- data=HEX,HEX|- db=N bytes=HEX
 * (numbers in decimal unless named HEX; "data" is each SGE's bytes for inline cases).
 *
 * Build: cc -O1 libmlx5_wqe_dump.c -libverbs -lmlx5
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#define FILL 0xa5
#define BUF_SIZE (16 * 1024)
#define REMOTE_OFF 8192   /* the RDMA target half of the buffer */
#define RECV_OFF 12288    /* where SENDs land */
#define MAX_INLINE 64
#define GID_INDEX 1

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct mlx5dv_qp dv;
static uint8_t *buf;
static unsigned outstanding; /* signaled WQEs posted and not yet polled */

static void die(const char *what, int err)
{
	fprintf(stderr, "libmlx5_wqe_dump: %s failed: %s\n", what, strerror(err ? err : errno));
	exit(1);
}

static uint32_t sq_counter(void)
{
	return be32toh(dv.dbrec[1]) & 0xffff;
}

static uint8_t *wqebb(uint32_t idx)
{
	return (uint8_t *)dv.sq.buf + (size_t)(idx & (dv.sq.wqe_cnt - 1)) * dv.sq.stride;
}

static void post_recvs(int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(buf + RECV_OFF), .length = 4096 - 64, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad;
		int err = ibv_post_recv(qp, &wr, &bad);
		if (err)
			die("ibv_post_recv", err);
	}
}

/* Polls until every signaled WQE posted so far has completed (which also retires the
 * unsignaled ones before it); receive completions are counted and replaced. */
static void drain(void)
{
	while (outstanding) {
		struct ibv_wc wc[8];
		int n = ibv_poll_cq(cq, 8, wc);
		if (n < 0)
			die("ibv_poll_cq", EIO);
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "libmlx5_wqe_dump: completion wr_id %" PRIu64 " status %s\n", wc[i].wr_id,
					ibv_wc_status_str(wc[i].status));
				exit(1);
			}
			if (wc[i].opcode & IBV_WC_RECV)
				post_recvs(1);
			else
				outstanding--;
		}
	}
}

static int post(struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int err = ibv_post_send(qp, wr, &bad);
	if (err)
		die("ibv_post_send", err);
	if (wr->send_flags & IBV_SEND_SIGNALED)
		outstanding++;
	return 0;
}

/* A signaled 8-byte RDMA WRITE (one WQE basic block), not printed. */
static void filler(void)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 99, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = (uintptr_t)(buf + REMOTE_OFF), .rkey = mr->rkey },
	};
	post(&wr);
	drain();
}

static const char *op_name(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND: return "SEND";
	case IBV_WR_SEND_WITH_IMM: return "SEND_IMM";
	case IBV_WR_RDMA_WRITE: return "WRITE";
	case IBV_WR_RDMA_WRITE_WITH_IMM: return "WRITE_IMM";
	case IBV_WR_RDMA_READ: return "READ";
	case IBV_WR_ATOMIC_CMP_AND_SWP: return "CAS";
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return "FAA";
	default: return "?";
	}
}

/* Posts `wr` as case `name` (at the last basic block of the queue if `at_end`) and
 * prints it. */
static void run_case(const char *name, struct ibv_send_wr *wr, int at_end)
{
	drain();
	if (at_end)
		while ((sq_counter() & (dv.sq.wqe_cnt - 1)) != dv.sq.wqe_cnt - 1)
			filler();
	uint32_t pi = sq_counter();
	/* The queue is idle: every basic block is free. Four cover any WQE posted here. */
	for (uint32_t k = 0; k < 4; k++)
		memset(wqebb(pi + k), FILL, dv.sq.stride);
	post(wr);

	const uint8_t *ctrl = wqebb(pi);
	unsigned ds = ctrl[7] & 0x3f;
	printf("case name=%s op=%s qpn=%u pi=%u signaled=%d solicited=%d fence=%d inline=%d", name,
	       op_name(wr->opcode), qp->qp_num, pi, !!(wr->send_flags & IBV_SEND_SIGNALED),
	       !!(wr->send_flags & IBV_SEND_SOLICITED), !!(wr->send_flags & IBV_SEND_FENCE),
	       !!(wr->send_flags & IBV_SEND_INLINE));
	uint64_t raddr = 0, compare = 0, swap = 0, add = 0;
	uint32_t rkey = 0;
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		raddr = wr->wr.rdma.remote_addr;
		rkey = wr->wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		compare = wr->wr.atomic.compare_add;
		swap = wr->wr.atomic.swap;
		raddr = wr->wr.atomic.remote_addr;
		rkey = wr->wr.atomic.rkey;
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		add = wr->wr.atomic.compare_add;
		raddr = wr->wr.atomic.remote_addr;
		rkey = wr->wr.atomic.rkey;
		break;
	default:
		break;
	}
	uint32_t imm = (wr->opcode == IBV_WR_SEND_WITH_IMM || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
			       ? be32toh(wr->imm_data) : 0;
	printf(" imm=%x raddr=%" PRIx64 " rkey=%x compare=%" PRIx64 " swap=%" PRIx64 " add=%" PRIx64, imm, raddr,
	       rkey, compare, swap, add);
	printf(" sges=");
	for (int i = 0; i < wr->num_sge; i++)
		printf("%s%" PRIx64 ":%u:%x", i ? "," : "", wr->sg_list[i].addr, wr->sg_list[i].length,
		       wr->sg_list[i].lkey);
	if (!wr->num_sge)
		printf("-");
	printf(" data=");
	if (wr->send_flags & IBV_SEND_INLINE && wr->num_sge) {
		for (int i = 0; i < wr->num_sge; i++) {
			printf("%s", i ? "," : "");
			const uint8_t *p = (const uint8_t *)(uintptr_t)wr->sg_list[i].addr;
			for (uint32_t j = 0; j < wr->sg_list[i].length; j++)
				printf("%02x", p[j]);
			if (!wr->sg_list[i].length)
				printf("-");
		}
	} else {
		printf("-");
	}
	printf(" db=%u bytes=", sq_counter());
	/* ds x 16 bytes from the control segment on, continuing at the start of the queue. */
	const uint8_t *start = dv.sq.buf, *end = start + (size_t)dv.sq.wqe_cnt * dv.sq.stride, *p = ctrl;
	for (unsigned i = 0; i < ds * 16; i++) {
		printf("%02x", *p++);
		if (p == end)
			p = start;
	}
	printf("\n");
	if (!(wr->send_flags & IBV_SEND_SIGNALED))
		filler(); /* retires the unsignaled WQE before the queue is filled again */
}

static struct ibv_sge sge(uint32_t off, uint32_t len)
{
	return (struct ibv_sge){ .addr = (uintptr_t)(buf + off), .length = len, .lkey = mr->lkey };
}

int main(void)
{
	int num;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list || !num) {
		fprintf(stderr, "libmlx5_wqe_dump: no RDMA device\n");
		return 1;
	}
	if (!mlx5dv_is_supported(list[0])) {
		fprintf(stderr, "libmlx5_wqe_dump: %s is not an mlx5 device\n", ibv_get_device_name(list[0]));
		return 1;
	}
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device", 0);
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd", 0);
	if (posix_memalign((void **)&buf, 4096, BUF_SIZE))
		die("posix_memalign", ENOMEM);
	for (int i = 0; i < BUF_SIZE; i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	mr = ibv_reg_mr(pd, buf, BUF_SIZE,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC);
	if (!mr)
		die("ibv_reg_mr", 0);
	cq = ibv_create_cq(ctx, 128, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq", 0);
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 0,
		.cap = { .max_send_wr = 4, .max_recv_wr = 32, .max_send_sge = 4, .max_recv_sge = 1,
			 .max_inline_data = MAX_INLINE },
	};
	qp = ibv_create_qp(pd, &ia);
	if (!qp)
		die("ibv_create_qp", 0);

	struct mlx5dv_obj obj = { .qp = { .in = qp, .out = &dv } };
	int err = mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP);
	if (err)
		die("mlx5dv_init_obj", err);
	if (dv.sq.stride != 64 || dv.sq.wqe_cnt < 8 || (dv.sq.wqe_cnt & (dv.sq.wqe_cnt - 1))) {
		fprintf(stderr, "libmlx5_wqe_dump: unexpected SQ geometry %u x %u\n", dv.sq.wqe_cnt, dv.sq.stride);
		return 1;
	}

	/* Connect the QP to itself. */
	union ibv_gid gid;
	if ((err = ibv_query_gid(ctx, 1, GID_INDEX, &gid)))
		die("ibv_query_gid", err);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
						    IBV_ACCESS_REMOTE_ATOMIC };
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
		die("modify to INIT", err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = GID_INDEX;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		die("modify to RTR", err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0;
	a.max_rd_atomic = 4;
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)))
		die("modify to RTS", err);
	post_recvs(32);

	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	if ((err = ibv_query_qp(qp, &qa, IBV_QP_CAP, &qia)))
		die("ibv_query_qp", err);
	printf("qp qpn=%u wqe_cnt=%u stride=%u max_inline=%u fill=%02x\n", qp->qp_num, dv.sq.wqe_cnt, dv.sq.stride,
	       qa.cap.max_inline_data, FILL);

	uint64_t remote = (uintptr_t)(buf + REMOTE_OFF);
	uint32_t rkey = mr->rkey;
#define WR(...) ((struct ibv_send_wr){ .wr_id = 7, __VA_ARGS__ })
	{
		struct ibv_sge s[] = { sge(0, 64) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED);
		run_case("send_1sge_signaled", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(64, 100), sge(300, 0), sge(512, 28) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 3, .opcode = IBV_WR_SEND);
		run_case("send_3sge_one_empty_unsignaled", &w, 0);
	}
	{
		struct ibv_send_wr w = WR(.num_sge = 0, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED);
		run_case("send_no_sge", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(1024, 16) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
					  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED,
					  .imm_data = htobe32(0x12345678));
		run_case("send_imm_solicited", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(2048, 8) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE);
		run_case("send_inline_8", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(2100, 13), sge(2200, 17) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 2, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_INLINE);
		run_case("send_inline_2sge_unsignaled", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(0, 256) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED, .wr.rdma = { remote, rkey });
		run_case("write_1sge_signaled", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(2304, 8) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, .wr.rdma = { remote + 64, rkey });
		run_case("write_inline_8", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(2400, 1) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_INLINE, .wr.rdma = { remote + 128, rkey });
		run_case("write_inline_1_unsignaled", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(0, 40), sge(128, 24) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 2, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE, .imm_data = htobe32(0xdeadbeef),
					  .wr.rdma = { remote + 256, rkey });
		run_case("write_imm_2sge_fence", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(4096, 100), sge(4300, 60) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 2, .opcode = IBV_WR_RDMA_READ,
					  .send_flags = IBV_SEND_SIGNALED, .wr.rdma = { remote + 512, rkey });
		run_case("read_2sge", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(4400, 200) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
					  .wr.rdma = { remote + 768, rkey });
		run_case("read_1sge_unsignaled", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(2450, 12) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE,
					  .imm_data = htobe32(0xa1b2c3d4), .wr.rdma = { remote + 896, rkey });
		run_case("write_imm_inline_12_solicited", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(4608, 8) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 1, .opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.atomic = { .remote_addr = remote + 1024, .compare_add = 0x0102030405060708ull,
							 .swap = 0x1112131415161718ull, .rkey = rkey });
		run_case("cmp_swap", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(4616, 8) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					  .send_flags = IBV_SEND_SIGNALED,
					  .wr.atomic = { .remote_addr = remote + 1032, .compare_add = 5, .rkey = rkey });
		run_case("fetch_add", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(4624, 8) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					  .wr.atomic = { .remote_addr = remote + 1040, .compare_add = 0xfffffffffffffff0ull,
							 .swap = 0x5555, .rkey = rkey });
		run_case("fetch_add_unsignaled", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(0, 16), sge(32, 16), sge(64, 16), sge(96, 16) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 4, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED);
		run_case("send_4sge_two_wqebbs", &w, 0);
	}
	{
		struct ibv_sge s[] = { sge(0, 16), sge(32, 16), sge(64, 16), sge(96, 16) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 4, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED);
		run_case("wrap_send_4sge", &w, 1);
	}
	{
		struct ibv_sge s[] = { sge(2500, 50) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE);
		run_case("wrap_send_inline_50", &w, 1);
	}
	{
		struct ibv_sge s[] = { sge(2600, 20), sge(2700, 40) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 2, .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE, .wr.rdma = { remote + 2048, rkey });
		run_case("wrap_write_inline_2sge_60", &w, 1);
	}
	{
		struct ibv_sge s[] = { sge(0, 8), sge(8, 8), sge(16, 8) };
		struct ibv_send_wr w = WR(.sg_list = s, .num_sge = 3, .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
					  .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(1),
					  .wr.rdma = { remote + 3000, rkey });
		run_case("wrap_write_imm_3sge", &w, 1);
	}
	drain();

	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(buf);
	return 0;
}
