/* rc_pair.h: what the stock dma-buf programs (dmabuf_write.c, cuda_dmabuf_write.c) share:
 * the CHECK-line reporting, softhca0 opened through stock libibverbs, two RC QPs of that
 * one device connected to each other over its RoCE v2 GID (index 1), and one signaled
 * work request posted and waited for.
 *
 * A header of static functions, included by exactly one translation unit per program,
 * so each program stays one `cc prog.c -libverbs` away from being built.
 */
#ifndef RC_PAIR_H
#define RC_PAIR_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* Every access a test MR and QP needs. */
#define RC_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
/* Inline data the QPs accept (IBV_SEND_INLINE up to this many bytes). */
#define RC_MAX_INLINE 64

static int failures;

/* Prints "CHECK <name> PASS" or "CHECK <name> FAIL <why>" and counts failures. */
static void check(const char *name, int ok, const char *why)
{
	if (ok)
		printf("CHECK %s PASS\n", name);
	else {
		printf("CHECK %s FAIL %s\n", name, why);
		failures++;
	}
	fflush(stdout);
}

/* A setup step failed (errno says why): exit status 2, distinct from a failed check. */
static void die(const char *what)
{
	printf("SETUP FAIL %s: %s\n", what, strerror(errno));
	exit(2);
}

/* softhca0, its PD, and (after rc_pair_connect) two connected RC QPs with a CQ each. */
struct rc_pair {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cqa, *cqb;
	struct ibv_qp *qa, *qb;
};

/* Opens softhca0 (dies when it is not listed: the program must run under
 * libdoorbell_preload.so) and allocates a PD on it. */
static void rc_pair_open(struct rc_pair *p)
{
	int n = 0;
	struct ibv_device *dev = NULL;
	memset(p, 0, sizeof(*p));
	p->list = ibv_get_device_list(&n);
	for (int i = 0; p->list && i < n; i++)
		if (strcmp(ibv_get_device_name(p->list[i]), "softhca0") == 0)
			dev = p->list[i];
	if (!dev) {
		errno = ENODEV;
		die("no softhca0 (run under libdoorbell_preload.so)");
	}
	p->ctx = ibv_open_device(dev);
	if (!p->ctx)
		die("ibv_open_device");
	p->pd = ibv_alloc_pd(p->ctx);
	if (!p->pd)
		die("ibv_alloc_pd");
}

static void rc_to_rts(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = RC_ACCESS,
	};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify_qp INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 0x100;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = 1; /* the IPv4-mapped RoCE v2 GID */
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify_qp RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0x100;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			  IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify_qp RTS");
}

/* Creates QPs "a" and "b" (a CQ each) and connects them to each other through RTS. */
static void rc_pair_connect(struct rc_pair *p)
{
	p->cqa = ibv_create_cq(p->ctx, 16, NULL, NULL, 0);
	p->cqb = ibv_create_cq(p->ctx, 16, NULL, NULL, 0);
	if (!p->cqa || !p->cqb)
		die("ibv_create_cq");
	struct ibv_qp_init_attr qi = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = RC_MAX_INLINE },
	};
	qi.send_cq = qi.recv_cq = p->cqa;
	p->qa = ibv_create_qp(p->pd, &qi);
	qi.send_cq = qi.recv_cq = p->cqb;
	p->qb = ibv_create_qp(p->pd, &qi);
	if (!p->qa || !p->qb)
		die("ibv_create_qp");
	union ibv_gid gid;
	if (ibv_query_gid(p->ctx, 1, 1, &gid))
		die("ibv_query_gid 1");
	rc_to_rts(p->qa, p->qb->qp_num, &gid);
	rc_to_rts(p->qb, p->qa->qp_num, &gid);
}

/* Destroys the QPs and CQs of rc_pair_connect. */
static void rc_pair_disconnect(struct rc_pair *p)
{
	if (p->qa)
		ibv_destroy_qp(p->qa);
	if (p->qb)
		ibv_destroy_qp(p->qb);
	if (p->cqa)
		ibv_destroy_cq(p->cqa);
	if (p->cqb)
		ibv_destroy_cq(p->cqb);
	p->qa = p->qb = NULL;
	p->cqa = p->cqb = NULL;
}

/* A fresh pair of connected QPs (after a remote access error left "a" in the error
 * state): the MRs stay registered. */
static void rc_pair_reconnect(struct rc_pair *p)
{
	rc_pair_disconnect(p);
	rc_pair_connect(p);
}

/* Destroys what rc_pair_open and rc_pair_connect made (MRs are the caller's). */
static void rc_pair_close(struct rc_pair *p)
{
	rc_pair_disconnect(p);
	ibv_dealloc_pd(p->pd);
	ibv_close_device(p->ctx);
	ibv_free_device_list(p->list);
}

/* The next completion on cq; dies after about 20 s without one. */
static struct ibv_wc wait_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	for (long spins = 0;; spins++) {
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			die("ibv_poll_cq");
		if (n == 1)
			return wc;
		if (spins > 200000L) {
			errno = ETIMEDOUT;
			die("no completion");
		}
		usleep(100);
	}
}

/* Posts one signaled work request (opcode, one SGE, remote address and key, extra send
 * flags such as IBV_SEND_INLINE) and returns its completion status. */
static int post_wait_flags(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode op, uint64_t laddr, uint32_t len,
			   uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t add, unsigned flags)
{
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED | flags }, *bad;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = add;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send");
	return wait_one(cq).status;
}

/* post_wait_flags with no extra flags. */
static int post_wait(struct ibv_qp *qp, struct ibv_cq *cq, enum ibv_wr_opcode op, uint64_t laddr, uint32_t len,
		     uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t add)
{
	return post_wait_flags(qp, cq, op, laddr, len, lkey, raddr, rkey, add, 0);
}

/* One signaled RDMA WRITE of len bytes of src at raddr; returns its completion status. */
static int write_wait(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *src, size_t len, uint64_t raddr, uint32_t rkey)
{
	return post_wait(qp, cq, IBV_WR_RDMA_WRITE, (uintptr_t)src->addr, (uint32_t)len, src->lkey, raddr, rkey, 0);
}

#endif
