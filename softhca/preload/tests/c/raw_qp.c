/* raw_qp.c: a RAW_PACKET QP on softhca0 through stock libibverbs + libmlx5 under
 * libdoorbell_preload.so.
 *
 *   raw_qp create   create, RESET->INIT->RTR->RTS, query, mlx5dv handles, destroy
 *   raw_qp eperm    the create must fail with EPERM (run without CAP_NET_RAW)
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
