/* raw_qp.c: a RAW_PACKET QP on softhca0 through stock libibverbs + libmlx5 under
 * libdoorbell_preload.so.
 *
 *   raw_qp create          create, RESET->INIT->RTR->RTS, query, mlx5dv handles, destroy
 *   raw_qp eperm           the create must fail with EPERM (run without CAP_NET_RAW)
 *   raw_qp send HEX...     sends each frame (hex) with ibv_post_send, one signaled WQE
 *                          each, and checks its completion
 *   raw_qp recv N          posts receives, prints READY, then one FRAME line per
 *                          completion until N arrived (0: until killed): status, byte_len, and from the
 *                          CQE itself (mlx5dv's CQ buffer) hds_ip_ext, l4_hdr_type_etc,
 *                          the flow tag (sop_drop_qpn), then the bytes in hex
 *   raw_qp bad noeth|short writes one malformed send WQE by hand (mlx5dv's SQ buffer,
 *                          doorbell record and BlueFlame register) and prints the
 *                          completion's status and vendor syndrome
 *
 * Expectations, from outside softhca: ib_uverbs' create_qp refuses IB_QPT_RAW_PACKET
 * to a process without CAP_NET_RAW with EPERM (uverbs_cmd.c / uverbs_std_types_qp.c);
 * mlx5_ib's create_raw_packet_qp answers with TIRN|TISN|RQN|SQN in the response's
 * comp_mask, which libmlx5 hands out through mlx5dv_init_obj's
 * MLX5DV_QP_MASK_RAW_QP_HANDLES, and the QP's number is the SQ's; a RAW_PACKET QP
 * moves RESET->INIT (port only) ->RTR->RTS with only the state attribute, and
 * ibv_query_qp reads the state back.
 *
 * Build: cc raw_qp.c -libverbs -lmlx5
 */
#include "rc_pair.h"

#include <infiniband/mlx5dv.h>

static struct ibv_qp *create_raw(struct rc_pair *p, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {
		.qp_type = IBV_QPT_RAW_PACKET, .send_cq = cq, .recv_cq = cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 1 },
	};
	return ibv_create_qp(p->pd, &a);
}

static int to_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s, .port_num = 1 };
	int mask = IBV_QP_STATE | (s == IBV_QPS_INIT ? IBV_QP_PORT : 0);
	return ibv_modify_qp(qp, &a, mask);
}

static enum ibv_qp_state query_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return (enum ibv_qp_state)-1;
	return a.qp_state;
}

static void hexline(const uint8_t *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		printf("%02x", b[i]);
}

static int unhex(const char *h, uint8_t *out, size_t max)
{
	size_t n = strlen(h) / 2;
	if (n > max)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return (int)n;
}

static struct ibv_qp *raw_to(struct rc_pair *p, struct ibv_cq *cq, enum ibv_qp_state last)
{
	struct ibv_qp *qp = create_raw(p, cq);
	if (!qp)
		die("ibv_create_qp RAW_PACKET");
	for (enum ibv_qp_state s = IBV_QPS_INIT; s <= last; s++)
		if (to_state(qp, s)) {
			errno = EINVAL;
			die("ibv_modify_qp");
		}
	return qp;
}

static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	/* The test's deadline ends a hang. */
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
	}
}

static int send_frames(struct rc_pair *p, struct ibv_cq *cq, int n, char **hex)
{
	static uint8_t buf[1 << 16];
	struct ibv_mr *mr = ibv_reg_mr(p->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	struct ibv_qp *qp = raw_to(p, cq, IBV_QPS_RTS);
	for (int i = 0; i < n; i++) {
		int len = unhex(hex[i], buf, sizeof(buf));
		if (len < 0) {
			errno = EINVAL;
			die("frame hex");
		}
		struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = (uint32_t)len, .lkey = mr->lkey };
		struct ibv_send_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;
		int r = ibv_post_send(qp, &wr, &bad);
		char name[32];
		snprintf(name, sizeof(name), "post_%d", i);
		check(name, r == 0, strerror(r));
		struct ibv_wc wc;
		wait_wc(cq, &wc);
		snprintf(name, sizeof(name), "sent_%d", i);
		check(name, wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)i && wc.opcode == IBV_WC_SEND,
		      ibv_wc_status_str(wc.status));
	}
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	return failures ? 1 : 0;
}

#define RECV_SLOTS 16
#define SLOT 2048

static int recv_frames(struct rc_pair *p, struct ibv_cq *cq, int want)
{
	static uint8_t buf[RECV_SLOTS * SLOT];
	struct ibv_mr *mr = ibv_reg_mr(p->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	struct mlx5dv_cq dcq;
	struct mlx5dv_obj obj = { .cq = { .in = cq, .out = &dcq } };
	if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ))
		die("mlx5dv_init_obj cq");
	struct ibv_qp *qp = raw_to(p, cq, IBV_QPS_RTR);
	for (int i = 0; i < RECV_SLOTS; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(buf + i * SLOT), .length = SLOT, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;
		if (ibv_post_recv(qp, &wr, &bad))
			die("ibv_post_recv");
	}
	printf("READY\n");
	fflush(stdout);
	/* want 0: until killed. */
	for (int k = 0; want == 0 || k < want; k++) {
		struct ibv_wc wc;
		wait_wc(cq, &wc);
		/* libmlx5 leaves the polled CQE in place: the k-th one of this CQ. */
		uint8_t *e = (uint8_t *)dcq.buf + (size_t)(k & (dcq.cqe_cnt - 1)) * dcq.cqe_size;
		struct mlx5_cqe64 *c = (struct mlx5_cqe64 *)(e + dcq.cqe_size - 64);
		printf("FRAME %s %u %02x %02x %06x ", ibv_wc_status_str(wc.status), wc.byte_len, c->hds_ip_ext,
		       c->l4_hdr_type_etc, be32toh(c->sop_drop_qpn) & 0xffffff);
		if (wc.status == IBV_WC_SUCCESS && wc.wr_id < RECV_SLOTS)
			hexline(buf + wc.wr_id * SLOT, wc.byte_len);
		printf("\n");
		fflush(stdout);
		/* Back on the RQ. */
		struct ibv_sge sge = { .addr = (uintptr_t)(buf + wc.wr_id * SLOT), .length = SLOT, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = wc.wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
		if (ibv_post_recv(qp, &wr, &bad))
			die("ibv_post_recv again");
	}
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	return 0;
}

static int bad_wqe(struct rc_pair *p, struct ibv_cq *cq, const char *kind)
{
	struct ibv_qp *qp = raw_to(p, cq, IBV_QPS_RTS);
	struct mlx5dv_qp dq = { 0 };
	struct mlx5dv_obj obj = { .qp = { .in = qp, .out = &dq } };
	if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP))
		die("mlx5dv_init_obj qp");
	uint8_t *w = dq.sq.buf;
	memset(w, 0, 64);
	struct mlx5_wqe_ctrl_seg *ctrl = (struct mlx5_wqe_ctrl_seg *)w;
	/* "noeth": the control segment alone. "short": control and an Ethernet segment
	 * with 4 inline bytes and no data: a 4-byte frame. */
	int ds = strcmp(kind, "noeth") == 0 ? 1 : 3;
	mlx5dv_set_ctrl_seg(ctrl, 0, MLX5_OPCODE_SEND, 0, qp->qp_num, MLX5_WQE_CTRL_CQ_UPDATE, ds, 0, 0);
	if (ds == 3) {
		struct mlx5_wqe_eth_seg *eth = (struct mlx5_wqe_eth_seg *)(w + 16);
		eth->inline_hdr_sz = htobe16(4);
		memcpy(eth->inline_hdr_start, "\xde\xad\xbe\xef", 4);
	}
	__sync_synchronize();
	dq.dbrec[MLX5_SND_DBR] = htobe32(1);
	__sync_synchronize();
	*(volatile uint64_t *)dq.bf.reg = *(uint64_t *)ctrl;
	__sync_synchronize();
	struct ibv_wc wc;
	wait_wc(cq, &wc);
	printf("BAD %s %s %d %#x\n", kind, ibv_wc_status_str(wc.status), wc.status, wc.vendor_err);
	fflush(stdout);
	ibv_destroy_qp(qp);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "create";
	struct rc_pair p;
	rc_pair_open(&p);
	struct ibv_cq *cq = ibv_create_cq(p.ctx, 64, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq");

	if (strcmp(mode, "eperm") == 0) {
		errno = 0;
		struct ibv_qp *qp = create_raw(&p, cq);
		check("eperm", !qp && errno == EPERM, qp ? "created" : strerror(errno));
		if (qp)
			ibv_destroy_qp(qp);
		return failures ? 1 : 0;
	}

	if (strcmp(mode, "send") == 0)
		return send_frames(&p, cq, argc - 2, argv + 2);
	if (strcmp(mode, "recv") == 0)
		return recv_frames(&p, cq, argc > 2 ? atoi(argv[2]) : 1);
	if (strcmp(mode, "bad") == 0)
		return bad_wqe(&p, cq, argc > 2 ? argv[2] : "noeth");

	struct ibv_qp *qp = create_raw(&p, cq);
	check("create", qp != NULL, qp ? "" : strerror(errno));
	if (!qp)
		return 1;
	printf("QPN %u\n", qp->qp_num);

	struct mlx5dv_qp dv = { .comp_mask = MLX5DV_QP_MASK_RAW_QP_HANDLES };
	struct mlx5dv_obj obj = { .qp = { .in = qp, .out = &dv } };
	int r = mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP);
	check("dv_init", r == 0, strerror(r));
	printf("HANDLES tirn %u tisn %u rqn %u sqn %u mask %#lx\n", dv.tirn, dv.tisn, dv.rqn, dv.sqn,
	       (unsigned long)dv.comp_mask);
	check("handles", (dv.comp_mask & MLX5DV_QP_MASK_RAW_QP_HANDLES) && dv.tirn && dv.tisn && dv.rqn && dv.sqn,
	      "missing");
	check("qpn_is_sqn", qp->qp_num == dv.sqn, "differs");
	check("rqn_differs", dv.rqn != dv.sqn, "same");

	check("query_reset", query_state(qp) == IBV_QPS_RESET, "state");
	r = to_state(qp, IBV_QPS_INIT);
	check("to_init", r == 0, strerror(r));
	check("query_init", query_state(qp) == IBV_QPS_INIT, "state");
	r = to_state(qp, IBV_QPS_RTR);
	check("to_rtr", r == 0, strerror(r));
	r = to_state(qp, IBV_QPS_RTS);
	check("to_rts", r == 0, strerror(r));
	check("query_rts", query_state(qp) == IBV_QPS_RTS, "state");
	/* RTS -> RTR is no transition of the IB state machine. */
	r = to_state(qp, IBV_QPS_RTR);
	check("rts_to_rtr_refused", r == EINVAL, r ? strerror(r) : "accepted");
	r = to_state(qp, IBV_QPS_ERR);
	check("to_err", r == 0, strerror(r));
	r = to_state(qp, IBV_QPS_RESET);
	check("to_reset", r == 0, strerror(r));
	r = to_state(qp, IBV_QPS_INIT);
	check("to_init_again", r == 0, strerror(r));

	r = ibv_destroy_qp(qp);
	check("destroy", r == 0, strerror(r));
	/* The CQ is free again: nothing of the QP's queues still names it. */
	r = ibv_destroy_cq(cq);
	check("destroy_cq", r == 0, strerror(r));
	return failures ? 1 : 0;
}
