/*
 * The libmlx5 half of the post-cost comparison in provider/benches/side-by-side.sh:
 * posts N RDMA WRITEs with the installed libibverbs + libmlx5 (on softhca under
 * libdoorbell_preload.so, or any mlx5 device), each from one measured function that
 * the script names in `valgrind --tool=callgrind --toggle-collect=FUNCTION`:
 *
 *   post_send_inline  ibv_post_send, 8 bytes inline          (mlx5_post_send)
 *   post_send_sge     ibv_post_send, one 8-byte gather entry
 *   wr_inline         ibv_wr_start, ibv_wr_rdma_write, ibv_wr_set_inline_data,
 *                     ibv_wr_complete (the "new post-send API" perftest uses)
 *   wr_sge            the same with ibv_wr_set_sge
 *
 * Usage: post_cost VARIANT N. The QP is connected to itself and its send queue holds
 * all N WQEs, so the measured calls never wait for completions (the writes are
 * unsignaled; one signaled WRITE at the end is waited for, outside the measurement).
 * The work request is prepared outside the measured function for ibv_post_send (an
 * application builds it once); for the ibv_wr_* API the calls are the request.
 *
 * Build: cc -O2 post_cost.c -libverbs -lmlx5
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#define BUF 8192
#define GID_INDEX 1

static struct ibv_qp *qp;
static struct ibv_qp_ex *qpx;
static struct ibv_mr *mr;
static uint8_t *buf;
static uint8_t data[8] = { 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a, 0x5a };

static void die(const char *what, int err)
{
	fprintf(stderr, "post_cost: %s failed: %s\n", what, strerror(err ? err : errno));
	exit(1);
}

__attribute__((noinline)) int post_send_inline(struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	return ibv_post_send(qp, wr, &bad);
}

__attribute__((noinline)) int post_send_sge(struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	return ibv_post_send(qp, wr, &bad);
}

__attribute__((noinline)) int wr_inline(uint64_t raddr, uint32_t rkey)
{
	ibv_wr_start(qpx);
	qpx->wr_id = 0x1234;
	qpx->wr_flags = 0;
	ibv_wr_rdma_write(qpx, rkey, raddr);
	ibv_wr_set_inline_data(qpx, data, sizeof data);
	return ibv_wr_complete(qpx);
}

__attribute__((noinline)) int wr_sge(uint64_t raddr, uint32_t rkey)
{
	ibv_wr_start(qpx);
	qpx->wr_id = 0x1234;
	qpx->wr_flags = 0;
	ibv_wr_rdma_write(qpx, rkey, raddr);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf, 8);
	return ibv_wr_complete(qpx);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: post_cost post_send_inline|post_send_sge|wr_inline|wr_sge N\n");
		return 2;
	}
	const char *v = argv[1];
	unsigned n = strtoul(argv[2], NULL, 0);
	int use_wr = !strncmp(v, "wr_", 3), inl = strstr(v, "inline") != NULL;

	int num;
	struct ibv_device **list = ibv_get_device_list(&num);
	if (!list || !num)
		die("ibv_get_device_list", ENODEV);
	struct ibv_context *ctx = ibv_open_device(list[0]);
	if (!ctx)
		die("ibv_open_device", 0);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd", 0);
	if (posix_memalign((void **)&buf, 4096, BUF))
		die("posix_memalign", ENOMEM);
	memset(buf, 7, BUF);
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr", 0);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq", 0);
	struct ibv_qp_cap cap = { .max_send_wr = n + 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1,
				  .max_inline_data = 8 };
	if (use_wr) {
		struct ibv_qp_init_attr_ex ia = {
			.send_cq = cq, .recv_cq = cq, .cap = cap, .qp_type = IBV_QPT_RC, .pd = pd,
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE,
		};
		qp = ibv_create_qp_ex(ctx, &ia);
		if (qp)
			qpx = ibv_qp_to_qp_ex(qp);
	} else {
		struct ibv_qp_init_attr ia = { .send_cq = cq, .recv_cq = cq, .cap = cap, .qp_type = IBV_QPT_RC };
		qp = ibv_create_qp(pd, &ia);
	}
	if (!qp)
		die("create QP", 0);

	union ibv_gid gid;
	int err = ibv_query_gid(ctx, 1, GID_INDEX, &gid);
	if (err)
		die("ibv_query_gid", err);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
		die("modify to INIT", err);
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = GID_INDEX;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
						 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		die("modify to RTR", err);
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if ((err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
						 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)))
		die("modify to RTS", err);

	uint64_t raddr = (uintptr_t)buf + 4096;
	struct ibv_sge sge = { .addr = (uintptr_t)(inl ? data : buf), .length = 8, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 0x1234, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = inl ? IBV_SEND_INLINE : 0, .wr.rdma = { .remote_addr = raddr, .rkey = mr->rkey },
	};
	for (unsigned i = 0; i < n; i++) {
		if (!strcmp(v, "post_send_inline"))
			err = post_send_inline(&wr);
		else if (!strcmp(v, "post_send_sge"))
			err = post_send_sge(&wr);
		else if (!strcmp(v, "wr_inline"))
			err = wr_inline(raddr, mr->rkey);
		else if (!strcmp(v, "wr_sge"))
			err = wr_sge(raddr, mr->rkey);
		else {
			fprintf(stderr, "post_cost: unknown variant %s\n", v);
			return 2;
		}
		if (err)
			die(v, err);
	}
	/* One signaled WRITE retires the unsignaled ones before it. */
	struct ibv_send_wr *bad;
	wr.send_flags |= IBV_SEND_SIGNALED;
	if ((err = ibv_post_send(qp, &wr, &bad)))
		die("final ibv_post_send", err);
	struct ibv_wc wc;
	int got;
	while ((got = ibv_poll_cq(cq, 1, &wc)) == 0)
		sched_yield(); /* lets softhca's engine thread run (under valgrind: at all) */
	if (got < 0 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "post_cost: final completion: %s\n", got < 0 ? "poll error" : ibv_wc_status_str(wc.status));
		return 1;
	}
	printf("libmlx5 post_cost %s x %u: ok\n", v, n);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
