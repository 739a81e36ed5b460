/* flow_qp.c: flow steering into a RAW_PACKET QP on softhca0 through stock libibverbs +
 * libmlx5 under libdoorbell_preload.so.
 *
 *   flow_qp udp PORT TAG   a RAW_PACKET QP in RTR with ibv_create_flow(IPv4 + UDP
 *                          destination PORT, flow tag TAG); posts receives, prints
 *                          READY, then one FRAME line per completion (status,
 *                          byte_len, the CQE's flow tag from sop_drop_qpn, the bytes
 *                          in hex) until a frame ending in "end" arrived; then
 *                          ibv_destroy_flow and ibv_destroy_qp, which must succeed,
 *                          and the QP's destroy while the flow lived must be EBUSY.
 *
 * Expectations, from outside softhca: ibv_create_flow of a NORMAL flow with
 * IBV_FLOW_SPEC_IPV4/UDP/ACTION_TAG specs (verbs.h) steers what matches to the QP and
 * nothing else (without the test-only fan-out nothing reaches a raw QP but through a
 * rule); mlx5 reports the flow tag in the CQE's sop_drop_qpn (mlx5dv.h); a QP with a
 * flow is busy (ib_destroy_qp_user: qp->usecnt).
 *
 * Build: cc flow_qp.c -libverbs -lmlx5
 */
#include "rc_pair.h"

#include <arpa/inet.h>
#include <infiniband/mlx5dv.h>

#define RECV_SLOTS 16
#define SLOT 2048

struct udp_flow {
	struct ibv_flow_attr attr;
	struct ibv_flow_spec_ipv4 ip;
	struct ibv_flow_spec_tcp_udp udp;
	struct ibv_flow_spec_action_tag tag;
};

static struct ibv_qp *raw_rtr(struct rc_pair *p, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {
		.qp_type = IBV_QPT_RAW_PACKET, .send_cq = cq, .recv_cq = cq,
		.cap = { .max_send_wr = 1, .max_recv_wr = RECV_SLOTS, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(p->pd, &a);
	if (!qp)
		die("ibv_create_qp RAW_PACKET");
	struct ibv_qp_attr s = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	if (ibv_modify_qp(qp, &s, IBV_QP_STATE | IBV_QP_PORT))
		die("to INIT");
	s.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &s, IBV_QP_STATE))
		die("to RTR");
	return qp;
}

static int udp(struct rc_pair *p, struct ibv_cq *cq, uint16_t port, uint32_t tag)
{
	static uint8_t buf[RECV_SLOTS * SLOT];
	struct ibv_mr *mr = ibv_reg_mr(p->pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	struct mlx5dv_cq dcq;
	struct mlx5dv_obj obj = { .cq = { .in = cq, .out = &dcq } };
	if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_CQ))
		die("mlx5dv_init_obj cq");
	struct ibv_qp *qp = raw_rtr(p, cq);
	struct udp_flow f = {
		.attr = { .type = IBV_FLOW_ATTR_NORMAL, .size = sizeof(f), .num_of_specs = 3, .port = 1 },
		.ip = { .type = IBV_FLOW_SPEC_IPV4, .size = sizeof(f.ip),
			.val = { .dst_ip = 0 }, .mask = { .dst_ip = 0 } },
		.udp = { .type = IBV_FLOW_SPEC_UDP, .size = sizeof(f.udp),
			 .val = { .dst_port = htons(port) }, .mask = { .dst_port = 0xffff } },
		.tag = { .type = IBV_FLOW_SPEC_ACTION_TAG, .size = sizeof(f.tag), .tag_id = tag },
	};
	struct ibv_flow *flow = ibv_create_flow(qp, &f.attr);
	if (!flow)
		die("ibv_create_flow");
	for (int i = 0; i < RECV_SLOTS; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(buf + i * SLOT), .length = SLOT, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;
		if (ibv_post_recv(qp, &wr, &bad))
			die("ibv_post_recv");
	}
	int busy = ibv_destroy_qp(qp);
	check("destroy_qp_with_flow_busy", busy == EBUSY, busy ? strerror(busy) : "destroyed");
	printf("READY\n");
	fflush(stdout);
	for (int k = 0;; k++) {
		struct ibv_wc wc;
		/* The test's deadline ends a hang. */
		while (ibv_poll_cq(cq, 1, &wc) == 0)
			;
		uint8_t *e = (uint8_t *)dcq.buf + (size_t)(k & (dcq.cqe_cnt - 1)) * dcq.cqe_size;
		struct mlx5_cqe64 *c = (struct mlx5_cqe64 *)(e + dcq.cqe_size - 64);
		uint8_t *b = buf + wc.wr_id * SLOT;
		printf("FRAME %s %u %06x ", ibv_wc_status_str(wc.status), wc.byte_len, be32toh(c->sop_drop_qpn) & 0xffffff);
		for (uint32_t i = 0; wc.status == IBV_WC_SUCCESS && i < wc.byte_len; i++)
			printf("%02x", b[i]);
		printf("\n");
		fflush(stdout);
		if (wc.status != IBV_WC_SUCCESS || (wc.byte_len >= 3 && memcmp(b + wc.byte_len - 3, "end", 3) == 0))
			break;
		struct ibv_sge sge = { .addr = (uintptr_t)b, .length = SLOT, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = wc.wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;
		if (ibv_post_recv(qp, &wr, &bad))
			die("ibv_post_recv again");
	}
	int r = ibv_destroy_flow(flow);
	check("destroy_flow", r == 0, strerror(r));
	r = ibv_destroy_qp(qp);
	check("destroy_qp", r == 0, strerror(r));
	ibv_dereg_mr(mr);
	printf("DONE\n");
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct rc_pair p;
	if (argc < 4 || strcmp(argv[1], "udp") != 0) {
		fprintf(stderr, "usage: flow_qp udp PORT TAG\n");
		return 2;
	}
	rc_pair_open(&p);
	struct ibv_cq *cq = ibv_create_cq(p.ctx, 64, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq");
	return udp(&p, cq, (uint16_t)atoi(argv[2]), (uint32_t)strtoul(argv[3], NULL, 0));
}
