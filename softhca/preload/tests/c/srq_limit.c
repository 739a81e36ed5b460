/* srq_limit.c: a shared receive queue through stock libibverbs + libmlx5 on softhca0:
 * QP "b" receives from an SRQ; what is checked is what the verbs and the IB spec say an
 * SRQ does, with the errnos mlx5_ib gives:
 *   create: ibv_query_srq reads back libmlx5's max_wr (its wait queue included: the
 *           kernel answers roundup_pow_of_two(2 * 8 + 1) - 1 = 31) and no limit;
 *   modify: a resize (IBV_SRQ_MAX_WR) and a limit >= the WQE count are EINVAL;
 *   receive: each SEND lands in the next posted WQE, in posting order, and the
 *            completion names it (wr_id) and QP b;
 *   limit:   armed at 3 with 4 WQEs posted, the first receive leaves 3 (no event), the
 *            second leaves 2: one IBV_EVENT_SRQ_LIMIT_REACHED for this SRQ, after which
 *            ibv_query_srq reads the limit as 0 (disarmed);
 *   error:   a SEND longer than the WQE completes that WQE with IBV_WC_LOC_LEN_ERR on b
 *            (wr_id 102) and IBV_WC_REM_INV_REQ_ERR on a; b's move to ERR flushes none
 *            of the SRQ's other WQEs: a new QP c on the SRQ receives into the last one
 *            (wr_id 103); b, in ERR, gets IBV_EVENT_QP_LAST_WQE_REACHED;
 *   destroy: EBUSY while QP b is attached, then 0;
 *   PD:      the receive buffer's key is checked against the SRQ's PD (IB spec: an SRQ's
 *            WQEs use the SRQ's protection domain), so a QP of PD 1 on an SRQ of PD 2
 *            receives into memory registered on PD 2.
 * Prints CHECK lines; exit status 0 when all pass, 1 when one failed, 2 on a setup error.
 */
#include <fcntl.h>
#include <poll.h>

#include "rc_pair.h"

int main(void)
{
	struct rc_pair p;
	rc_pair_open(&p);
	struct ibv_cq *cqa = ibv_create_cq(p.ctx, 16, NULL, NULL, 0);
	struct ibv_cq *cqb = ibv_create_cq(p.ctx, 16, NULL, NULL, 0);
	if (!cqa || !cqb)
		die("ibv_create_cq");
	struct ibv_srq_init_attr si = { .srq_context = &p, .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(p.pd, &si);
	if (!srq)
		die("ibv_create_srq");
	struct ibv_srq_attr sa;
	int r = ibv_query_srq(srq, &sa);
	check("query_after_create", r == 0 && sa.max_wr == 31 && sa.srq_limit == 0, "max_wr 31, limit 0");
	memset(&sa, 0, sizeof(sa));
	sa.max_wr = 64;
	check("resize_refused", ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR) == EINVAL, "EINVAL");
	sa.srq_limit = 32;
	check("limit_too_big", ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == EINVAL, "EINVAL");

	struct ibv_qp_init_attr qi = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	qi.send_cq = qi.recv_cq = cqa;
	p.qa = ibv_create_qp(p.pd, &qi);
	qi.send_cq = qi.recv_cq = cqb;
	qi.srq = srq;
	p.qb = ibv_create_qp(p.pd, &qi);
	if (!p.qa || !p.qb)
		die("ibv_create_qp");
	union ibv_gid gid;
	if (ibv_query_gid(p.ctx, 1, 1, &gid))
		die("ibv_query_gid 1");
	rc_to_rts(p.qa, p.qb->qp_num, &gid);
	rc_to_rts(p.qb, p.qa->qp_num, &gid);

	static char buf[8192];
	struct ibv_mr *mr = ibv_reg_mr(p.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	/* Four receive WQEs of 256 bytes at buf + 4096 + 256 * i, wr_id 100 + i. */
	for (int i = 0; i < 4; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(buf + 4096 + 256 * i), .length = 256, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1 }, *bad;
		if (ibv_post_srq_recv(srq, &wr, &bad))
			die("ibv_post_srq_recv");
	}
	sa.srq_limit = 3;
	check("arm_limit", ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT) == 0, "0");
	check("limit_reads_back", ibv_query_srq(srq, &sa) == 0 && sa.srq_limit == 3, "3");

	int fl = fcntl(p.ctx->async_fd, F_GETFL);
	if (fl < 0 || fcntl(p.ctx->async_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		die("async fd non-blocking");
	int events = 0;
	for (int m = 0; m < 2; m++) {
		memset(buf, 'A' + m, 64);
		int st = post_wait(p.qa, cqa, IBV_WR_SEND, (uintptr_t)buf, 64, mr->lkey, 0, 0, 0);
		struct ibv_wc wc = wait_one(cqb);
		char name[32];
		snprintf(name, sizeof(name), "receive_%d", m);
		int ok = st == IBV_WC_SUCCESS && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
			 wc.wr_id == (uint64_t)(100 + m) && wc.qp_num == p.qb->qp_num && wc.byte_len == 64 &&
			 buf[4096 + 256 * m] == 'A' + m && buf[4096 + 256 * m + 63] == 'A' + m;
		check(name, ok, "SEND lands in the next SRQ WQE, completion names it and QP b");
		if (m == 0) {
			/* 3 left: not below the limit; nothing to read (the device raised the
			 * event, if any, before it wrote the CQE just polled). */
			struct ibv_async_event ev;
			if (ibv_get_async_event(p.ctx, &ev) == 0) {
				events++;
				ibv_ack_async_event(&ev);
			}
			check("no_event_at_limit", events == 0, "no event with 3 left");
		}
	}
	struct pollfd pfd = { .fd = p.ctx->async_fd, .events = POLLIN };
	int ready = poll(&pfd, 1, 20000);
	struct ibv_async_event ev;
	int got = ready == 1 && ibv_get_async_event(p.ctx, &ev) == 0;
	check("limit_event", got && ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq,
	      "IBV_EVENT_SRQ_LIMIT_REACHED for the SRQ");
	if (got)
		ibv_ack_async_event(&ev);
	check("limit_disarmed", ibv_query_srq(srq, &sa) == 0 && sa.srq_limit == 0, "0 after the event");
	check("one_event", ibv_get_async_event(p.ctx, &ev) != 0, "no second event");

	/* 300 bytes into the third WQE's 256. */
	int st = post_wait(p.qa, cqa, IBV_WR_SEND, (uintptr_t)buf, 300, mr->lkey, 0, 0, 0);
	struct ibv_wc wc = wait_one(cqb);
	check("length_error", wc.status == IBV_WC_LOC_LEN_ERR && wc.wr_id == 102 && wc.qp_num == p.qb->qp_num,
	      "LOC_LEN_ERR for wr_id 102 on QP b");
	check("length_error_requester", st == IBV_WC_REM_INV_REQ_ERR, "REM_INV_REQ_ERR on QP a");
	/* QP b is in ERR now: once it holds no WQE of the SRQ, one Last WQE Reached for it. */
	int last_wqe = 0;
	while (poll(&pfd, 1, 20000) == 1 && ibv_get_async_event(p.ctx, &ev) == 0) {
		if (ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED && ev.element.qp == p.qb)
			last_wqe++;
		ibv_ack_async_event(&ev);
		if (last_wqe)
			break;
	}
	check("last_wqe_reached", last_wqe == 1, "IBV_EVENT_QP_LAST_WQE_REACHED for QP b");
	struct ibv_cq *cqc = ibv_create_cq(p.ctx, 16, NULL, NULL, 0);
	struct ibv_cq *cqd = ibv_create_cq(p.ctx, 16, NULL, NULL, 0);
	if (!cqc || !cqd)
		die("ibv_create_cq");
	qi.send_cq = qi.recv_cq = cqc;
	struct ibv_qp *qc = ibv_create_qp(p.pd, &qi);
	qi.srq = NULL;
	qi.send_cq = qi.recv_cq = cqd;
	struct ibv_qp *qd = ibv_create_qp(p.pd, &qi);
	if (!qc || !qd)
		die("ibv_create_qp c, d");
	rc_to_rts(qc, qd->qp_num, &gid);
	rc_to_rts(qd, qc->qp_num, &gid);
	memset(buf, 'Z', 64);
	st = post_wait(qd, cqd, IBV_WR_SEND, (uintptr_t)buf, 64, mr->lkey, 0, 0, 0);
	wc = wait_one(cqc);
	check("srq_survives_flush", st == IBV_WC_SUCCESS && wc.status == IBV_WC_SUCCESS && wc.wr_id == 103 &&
	      wc.qp_num == qc->qp_num && buf[4096 + 256 * 3] == 'Z', "QP c receives into wr_id 103");
	ibv_destroy_qp(qc);
	ibv_destroy_qp(qd);
	ibv_destroy_cq(cqc);
	ibv_destroy_cq(cqd);

	check("destroy_busy", ibv_destroy_srq(srq) == EBUSY, "EBUSY while QP b is attached");
	ibv_destroy_qp(p.qb);
	p.qb = NULL;
	check("destroy", ibv_destroy_srq(srq) == 0, "0");
	struct ibv_pd *pd2 = ibv_alloc_pd(p.ctx);
	if (!pd2)
		die("ibv_alloc_pd 2");
	struct ibv_srq *srq2 = ibv_create_srq(pd2, &si);
	static char buf2[4096];
	struct ibv_mr *mr2 = ibv_reg_mr(pd2, buf2, sizeof(buf2), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_cq *cqe_ = ibv_create_cq(p.ctx, 16, NULL, NULL, 0);
	struct ibv_cq *cqf = ibv_create_cq(p.ctx, 16, NULL, NULL, 0);
	if (!srq2 || !mr2 || !cqe_ || !cqf)
		die("PD 2 objects");
	qi.srq = NULL;
	qi.send_cq = qi.recv_cq = cqe_;
	struct ibv_qp *qe = ibv_create_qp(p.pd, &qi);
	qi.srq = srq2;
	qi.send_cq = qi.recv_cq = cqf;
	struct ibv_qp *qf = ibv_create_qp(p.pd, &qi);
	if (!qe || !qf)
		die("ibv_create_qp e, f");
	rc_to_rts(qe, qf->qp_num, &gid);
	rc_to_rts(qf, qe->qp_num, &gid);
	struct ibv_sge sge2 = { .addr = (uintptr_t)buf2, .length = 256, .lkey = mr2->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &sge2, .num_sge = 1 }, *rbad;
	if (ibv_post_srq_recv(srq2, &rwr, &rbad))
		die("ibv_post_srq_recv 2");
	memset(buf, 'P', 64);
	st = post_wait(qe, cqe_, IBV_WR_SEND, (uintptr_t)buf, 64, mr->lkey, 0, 0, 0);
	wc = wait_one(cqf);
	check("srq_pd", st == IBV_WC_SUCCESS && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 && buf2[63] == 'P',
	      "received with the SRQ's PD");
	ibv_destroy_qp(qe);
	ibv_destroy_qp(qf);
	ibv_destroy_srq(srq2);
	ibv_dereg_mr(mr2);
	ibv_destroy_cq(cqe_);
	ibv_destroy_cq(cqf);
	ibv_dealloc_pd(pd2);

	ibv_dereg_mr(mr);
	ibv_destroy_qp(p.qa);
	p.qa = NULL;
	ibv_destroy_cq(cqa);
	ibv_destroy_cq(cqb);
	rc_pair_close(&p);
	return failures ? 1 : 0;
}
