/* udp_sport.c: libmlx5's mlx5dv_modify_qp_udp_sport on softhca0, through stock
 * libibverbs + libmlx5 under libdoorbell_preload.so.
 *
 * Two RC QPs of one device connected to each other: an RDMA WRITE from "a" (from the
 * port mlx5_ib's mlx5_set_path gave it), then mlx5dv_modify_qp_udp_sport(a, 0xd00d)
 * (an RTS2RTS_QP DevX command with MLX5_QPC_OPT_MASK_32_UDP_SPORT), then another WRITE,
 * which must still complete (the command changes the port and nothing else). The same
 * call on a UD QP must be refused with EOPNOTSUPP, as libmlx5 refuses it. Prints the
 * QPNs and a CHECK line per step; the Rust side (tests/stock_udp_sport.rs) reads the
 * ports off the capture.
 *
 * Build: cc udp_sport.c -libverbs -lmlx5
 */
#include "rc_pair.h"

#include <infiniband/mlx5dv.h>

#define NEW_SPORT 0xd00d

int main(void)
{
	struct rc_pair p;
	rc_pair_open(&p);
	rc_pair_connect(&p);
	printf("QPN a %u b %u\n", p.qa->qp_num, p.qb->qp_num);

	static char buf[8192];
	struct ibv_mr *mr = ibv_reg_mr(p.pd, buf, sizeof(buf), RC_ACCESS);
	if (!mr)
		die("ibv_reg_mr");
	uint64_t dst = (uintptr_t)buf + 4096;
	memset(buf, 0x5a, 64);
	check("write_before", write_wait(p.qa, p.cqa, mr, 64, dst, mr->rkey) == IBV_WC_SUCCESS, "status");
	/* The capture is read after exit; this line marks where the port changes. */
	printf("MODIFY\n");
	fflush(stdout);
	int r = mlx5dv_modify_qp_udp_sport(p.qa, NEW_SPORT);
	check("modify_udp_sport", r == 0, strerror(r));
	memset(buf, 0xa5, 64);
	int st = write_wait(p.qa, p.cqa, mr, 64, dst, mr->rkey);
	check("write_after", st == IBV_WC_SUCCESS && memcmp(buf, buf + 4096, 64) == 0, ibv_wc_status_str(st));

	struct ibv_qp_init_attr ui = {
		.qp_type = IBV_QPT_UD, .send_cq = p.cqa, .recv_cq = p.cqa,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *ud = ibv_create_qp(p.pd, &ui);
	if (!ud)
		die("ibv_create_qp UD");
	r = mlx5dv_modify_qp_udp_sport(ud, NEW_SPORT);
	check("ud_refused", r == EOPNOTSUPP, r ? strerror(r) : "accepted");
	ibv_destroy_qp(ud);

	ibv_dereg_mr(mr);
	rc_pair_close(&p);
	return failures ? 1 : 0;
}
