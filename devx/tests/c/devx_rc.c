/* devx_rc.c: stock libmlx5's DevX on softhca, written the way a DevX user writes it.
 *
 * mlx5dv_open_device(MLX5DV_CONTEXT_FLAGS_DEVX); QUERY_HCA_CAP through
 * mlx5dv_devx_general_cmd; a CQ and an RC QP created with mlx5dv_devx_obj_create, their
 * rings and doorbell records in mlx5dv_devx_umem_reg memory, doorbells on a
 * mlx5dv_devx_alloc_uar page; the QP moved RST2INIT -> INIT2RTR -> RTR2RTS with PRM
 * commands; WQEs written here (mlx5dv.h's segment setters), doorbells rung here, CQEs
 * polled here; the other end a verbs RC QP (ibv_create_qp) of the same device; and
 * mlx5dv_devx_qp_query(QUERY_QP) on that verbs QP.
 *
 * The PRM layouts are defined below with only the fields used, in mlx5_ifc.h's style
 * (one u8 per bit; offsets from the PRM structures in the kernel's
 * include/linux/mlx5/mlx5_ifc.h), and accessed with mlx5dv.h's DEVX_SET/DEVX_GET.
 *
 * Prints "CHECK <name> PASS|FAIL <why>" per check (rc_pair.h); exit 0 when all pass,
 * 1 when one failed, 2 when a setup step failed.
 */
#include <endian.h>
#include <sched.h>
#include <stdint.h>
#include <infiniband/mlx5dv.h>

#include "rc_pair.h"

typedef uint8_t u8;

/* The DevX UAR's type: non-cached by default; the static-UAR run builds with
 * -DUAR_TYPE=MLX5DV_UAR_ALLOC_TYPE_BF (libmlx5 hands out NC pages only on contexts
 * with dynamic UARs, and answers EOPNOTSUPP otherwise). */
#ifndef UAR_TYPE
#define UAR_TYPE MLX5DV_UAR_ALLOC_TYPE_NC
#endif

struct mlx5_ifc_mbox_out_bits {
	u8 status[0x8]; u8 reserved_at_8[0x18];
	u8 syndrome[0x20];
	u8 reserved_at_40[0x40];
};

struct mlx5_ifc_query_hca_cap_in_bits {
	u8 opcode[0x10]; u8 uid[0x10];
	u8 reserved_at_20[0x10]; u8 op_mod[0x10];
	u8 reserved_at_40[0x40];
};

/* The general capability page, as far as read here. */
struct mlx5_ifc_cmd_hca_cap_bits {
	u8 reserved_at_0[0x9b]; u8 log_max_qp[0x5];
	u8 reserved_at_a0[0x28]; u8 log_max_cq_sz[0x8];
	u8 reserved_at_d0[0x7f30]; /* the page is the 0x8000-bit capability union */
};

struct mlx5_ifc_query_hca_cap_out_bits {
	u8 status[0x8]; u8 reserved_at_8[0x18];
	u8 syndrome[0x20];
	u8 reserved_at_40[0x40];
	struct mlx5_ifc_cmd_hca_cap_bits capability;
};

struct mlx5_ifc_cqc_bits {
	u8 status[0x4]; u8 reserved_at_4[0x2]; u8 dbr_umem_valid[0x1]; u8 reserved_at_7[0x1];
	u8 cqe_sz[0x3]; u8 reserved_at_b[0x15];
	u8 dbr_umem_id[0x20];
	u8 reserved_at_40[0x23]; u8 log_cq_size[0x5]; u8 uar_page[0x18];
	u8 reserved_at_80[0x38]; u8 c_eqn[0x8];
	u8 reserved_at_c0[0x100];
	u8 dbr_addr[0x40];
};

struct mlx5_ifc_create_cq_in_bits {
	u8 opcode[0x10]; u8 uid[0x10];
	u8 reserved_at_20[0x10]; u8 op_mod[0x10];
	u8 reserved_at_40[0x40];
	struct mlx5_ifc_cqc_bits cq_context;
	u8 cq_umem_offset[0x40];
	u8 cq_umem_id[0x20];
	u8 cq_umem_valid[0x1]; u8 reserved_at_2e1[0x59f];
};

struct mlx5_ifc_create_cq_out_bits {
	u8 status[0x8]; u8 reserved_at_8[0x18];
	u8 syndrome[0x20];
	u8 reserved_at_40[0x8]; u8 cqn[0x18];
	u8 reserved_at_60[0x20];
};

struct mlx5_ifc_ads_bits {
	u8 reserved_at_0[0x10]; u8 pkey_index[0x10];
	u8 reserved_at_20[0x8]; u8 grh[0x1]; u8 reserved_at_29[0x17];
	u8 ack_timeout[0x5]; u8 reserved_at_45[0x3]; u8 src_addr_index[0x8]; u8 reserved_at_50[0x8]; u8 hop_limit[0x8];
	u8 reserved_at_60[0x20];
	u8 rgid_rip[16][0x8];
	u8 reserved_at_100[0x10]; u8 udp_sport[0x10];
	u8 reserved_at_120[0x8]; u8 vhca_port_num[0x8]; u8 rmac_47_32[0x10];
	u8 rmac_31_0[0x20];
};

struct mlx5_ifc_qpc_bits {
	u8 state[0x4]; u8 reserved_at_4[0x4]; u8 st[0x8]; u8 reserved_at_10[0x3]; u8 pm_state[0x2]; u8 reserved_at_15[0x13];
	u8 pd[0x18];
	u8 mtu[0x3]; u8 log_msg_max[0x5]; u8 reserved_at_48[0x1]; u8 log_rq_size[0x4]; u8 log_rq_stride[0x3];
	u8 no_sq[0x1]; u8 log_sq_size[0x4]; u8 reserved_at_55[0x13];
	u8 uar_page[0x18];
	u8 reserved_at_80[0x8]; u8 user_index[0x18];
	u8 reserved_at_a0[0x3]; u8 log_page_size[0x5]; u8 remote_qpn[0x18];
	struct mlx5_ifc_ads_bits primary_address_path;
	u8 reserved_at_220[0x168];
	u8 log_sra_max[0x3]; u8 reserved_at_38b[0x2]; u8 retry_count[0x3]; u8 rnr_retry[0x3]; u8 reserved_at_393[0x35];
	u8 next_send_psn[0x18];
	u8 reserved_at_3e0[0x8]; u8 cqn_snd[0x18];
	u8 reserved_at_400[0x88];
	u8 log_rra_max[0x3]; u8 reserved_at_48b[0x5]; u8 rre[0x1]; u8 rwe[0x1]; u8 rae[0x1]; u8 reserved_at_493[0x10];
	u8 min_rnr_nak[0x5]; u8 next_rcv_psn[0x18];
	u8 reserved_at_4c0[0x28]; u8 cqn_rcv[0x18];
	u8 dbr_addr[0x40];
	u8 q_key[0x20];
	u8 reserved_at_560[0x123]; u8 dbr_umem_valid[0x1]; u8 reserved_at_684[0x9c];
	u8 dbr_umem_id[0x20];
};

struct mlx5_ifc_create_qp_in_bits {
	u8 opcode[0x10]; u8 uid[0x10];
	u8 reserved_at_20[0x10]; u8 op_mod[0x10];
	u8 reserved_at_40[0x40];
	u8 opt_param_mask[0x20];
	u8 reserved_at_a0[0x20];
	struct mlx5_ifc_qpc_bits qpc;
	u8 wq_umem_offset[0x40];
	u8 wq_umem_id[0x20];
	u8 wq_umem_valid[0x1]; u8 reserved_at_861[0x1f];
};

struct mlx5_ifc_create_qp_out_bits {
	u8 status[0x8]; u8 reserved_at_8[0x18];
	u8 syndrome[0x20];
	u8 reserved_at_40[0x8]; u8 qpn[0x18];
	u8 reserved_at_60[0x20];
};

/* RST2INIT, INIT2RTR and RTR2RTS share this shape. */
struct mlx5_ifc_modify_qp_in_bits {
	u8 opcode[0x10]; u8 uid[0x10];
	u8 reserved_at_20[0x10]; u8 op_mod[0x10];
	u8 reserved_at_40[0x8]; u8 qpn[0x18];
	u8 reserved_at_60[0x20];
	u8 opt_param_mask[0x20];
	u8 reserved_at_a0[0x20];
	struct mlx5_ifc_qpc_bits qpc;
	u8 reserved_at_800[0x80];
};

struct mlx5_ifc_query_qp_in_bits {
	u8 opcode[0x10]; u8 uid[0x10];
	u8 reserved_at_20[0x10]; u8 op_mod[0x10];
	u8 reserved_at_40[0x8]; u8 qpn[0x18];
	u8 reserved_at_60[0x20];
};

struct mlx5_ifc_query_qp_out_bits {
	u8 status[0x8]; u8 reserved_at_8[0x18];
	u8 syndrome[0x20];
	u8 reserved_at_40[0x40];
	u8 opt_param_mask[0x20];
	u8 reserved_at_a0[0x20];
	struct mlx5_ifc_qpc_bits qpc;
	u8 reserved_at_800[0x80];
};

enum {
	OP_QUERY_HCA_CAP = 0x100, OP_CREATE_CQ = 0x400, OP_CREATE_QP = 0x500, OP_RST2INIT_QP = 0x502,
	OP_INIT2RTR_QP = 0x503, OP_RTR2RTS_QP = 0x504, OP_QUERY_QP = 0x50b,
	QP_ST_RC = 0x0, QP_PM_MIGRATED = 0x3, QP_STATE_RTS = 0x3, MTU_1024 = 0x3,
	LOG_CQ = 6, LOG_SQ = 6, LOG_RQ = 6, RQ_STRIDE = 16, LEN = 1500, PSN = 0x100,
};

struct devx_side {
	struct mlx5dv_devx_uar *uar;
	struct mlx5dv_devx_umem *cq_umem, *cq_dbr_umem, *wq_umem, *qp_dbr_umem;
	struct mlx5dv_devx_obj *cq, *qp;
	uint8_t *cq_buf, *wq;
	volatile uint32_t *cq_dbr, *qp_dbr;
	uint32_t cqn, qpn, ci, rq_head;
	uint16_t sq_pi;
};

static void *page_mem(size_t len)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, len))
		die("posix_memalign");
	memset(p, 0, len);
	return p;
}

static struct mlx5dv_devx_umem *umem(struct ibv_context *ctx, void *p, size_t len)
{
	struct mlx5dv_devx_umem *u = mlx5dv_devx_umem_reg(ctx, p, len, IBV_ACCESS_LOCAL_WRITE);
	if (!u)
		die("mlx5dv_devx_umem_reg");
	return u;
}

/* A PRM command on a DevX object; dies with the status and syndrome on failure. */
static void modify(struct mlx5dv_devx_obj *o, void *in, size_t inlen, const char *what)
{
	uint32_t out[DEVX_ST_SZ_DW(mbox_out)] = {0};
	if (mlx5dv_devx_obj_modify(o, in, inlen, out, sizeof(out))) {
		printf("SETUP FAIL %s: %s status %#x syndrome %#x\n", what, strerror(errno),
		       DEVX_GET(mbox_out, out, status), DEVX_GET(mbox_out, out, syndrome));
		exit(2);
	}
}

static void devx_create(struct ibv_context *ctx, uint32_t pdn, struct devx_side *s)
{
	uint32_t eqn = 0;
	s->uar = mlx5dv_devx_alloc_uar(ctx, UAR_TYPE);
	if (!s->uar)
		die("mlx5dv_devx_alloc_uar");
	if (mlx5dv_devx_query_eqn(ctx, 0, &eqn))
		die("mlx5dv_devx_query_eqn");

	size_t cq_len = 64 << LOG_CQ;
	s->cq_buf = page_mem(cq_len);
	for (int i = 0; i < 1 << LOG_CQ; i++)
		((struct mlx5_cqe64 *)(s->cq_buf + 64 * i))->op_own = MLX5_CQE_INVALID << 4;
	s->cq_dbr = page_mem(4096);
	s->cq_umem = umem(ctx, s->cq_buf, cq_len);
	s->cq_dbr_umem = umem(ctx, (void *)s->cq_dbr, 4096);

	uint32_t in[DEVX_ST_SZ_DW(create_cq_in)] = {0};
	uint32_t out[DEVX_ST_SZ_DW(create_cq_out)] = {0};
	DEVX_SET(create_cq_in, in, opcode, OP_CREATE_CQ);
	void *cqc = DEVX_ADDR_OF(create_cq_in, in, cq_context);
	DEVX_SET(cqc, cqc, log_cq_size, LOG_CQ);
	DEVX_SET(cqc, cqc, uar_page, s->uar->page_id);
	DEVX_SET(cqc, cqc, c_eqn, eqn);
	DEVX_SET(cqc, cqc, dbr_umem_valid, 1);
	DEVX_SET(cqc, cqc, dbr_umem_id, s->cq_dbr_umem->umem_id);
	DEVX_SET64(cqc, cqc, dbr_addr, 0);
	DEVX_SET(create_cq_in, in, cq_umem_valid, 1);
	DEVX_SET(create_cq_in, in, cq_umem_id, s->cq_umem->umem_id);
	DEVX_SET64(create_cq_in, in, cq_umem_offset, 0);
	s->cq = mlx5dv_devx_obj_create(ctx, in, sizeof(in), out, sizeof(out));
	if (!s->cq) {
		printf("SETUP FAIL CREATE_CQ: %s status %#x syndrome %#x\n", strerror(errno),
		       DEVX_GET(create_cq_out, out, status), DEVX_GET(create_cq_out, out, syndrome));
		exit(2);
	}
	s->cqn = DEVX_GET(create_cq_out, out, cqn);

	size_t rq_len = (1 << LOG_RQ) * RQ_STRIDE, wq_len = rq_len + (64 << LOG_SQ);
	s->wq = page_mem(wq_len);
	s->qp_dbr = page_mem(4096);
	s->wq_umem = umem(ctx, s->wq, wq_len);
	s->qp_dbr_umem = umem(ctx, (void *)s->qp_dbr, 4096);

	uint32_t qin[DEVX_ST_SZ_DW(create_qp_in)] = {0};
	uint32_t qout[DEVX_ST_SZ_DW(create_qp_out)] = {0};
	DEVX_SET(create_qp_in, qin, opcode, OP_CREATE_QP);
	void *qpc = DEVX_ADDR_OF(create_qp_in, qin, qpc);
	DEVX_SET(qpc, qpc, st, QP_ST_RC);
	DEVX_SET(qpc, qpc, pm_state, QP_PM_MIGRATED);
	DEVX_SET(qpc, qpc, pd, pdn);
	DEVX_SET(qpc, qpc, uar_page, s->uar->page_id);
	DEVX_SET(qpc, qpc, log_sq_size, LOG_SQ);
	DEVX_SET(qpc, qpc, log_rq_size, LOG_RQ);
	DEVX_SET(qpc, qpc, log_rq_stride, 0); /* 16 << 0 bytes: one data segment */
	DEVX_SET(qpc, qpc, cqn_snd, s->cqn);
	DEVX_SET(qpc, qpc, cqn_rcv, s->cqn);
	DEVX_SET(qpc, qpc, dbr_umem_valid, 1);
	DEVX_SET(qpc, qpc, dbr_umem_id, s->qp_dbr_umem->umem_id);
	DEVX_SET64(qpc, qpc, dbr_addr, 0);
	DEVX_SET(create_qp_in, qin, wq_umem_valid, 1);
	DEVX_SET(create_qp_in, qin, wq_umem_id, s->wq_umem->umem_id);
	DEVX_SET64(create_qp_in, qin, wq_umem_offset, 0);
	s->qp = mlx5dv_devx_obj_create(ctx, qin, sizeof(qin), qout, sizeof(qout));
	if (!s->qp) {
		printf("SETUP FAIL CREATE_QP: %s status %#x syndrome %#x\n", strerror(errno),
		       DEVX_GET(create_qp_out, qout, status), DEVX_GET(create_qp_out, qout, syndrome));
		exit(2);
	}
	s->qpn = DEVX_GET(create_qp_out, qout, qpn);
}

static void devx_connect(struct devx_side *s, uint32_t remote_qpn, const union ibv_gid *gid)
{
	uint32_t in[DEVX_ST_SZ_DW(modify_qp_in)];
	void *qpc = DEVX_ADDR_OF(modify_qp_in, in, qpc);
	void *ads = DEVX_ADDR_OF(qpc, qpc, primary_address_path);

	memset(in, 0, sizeof(in));
	DEVX_SET(modify_qp_in, in, opcode, OP_RST2INIT_QP);
	DEVX_SET(modify_qp_in, in, qpn, s->qpn);
	DEVX_SET(qpc, qpc, rre, 1);
	DEVX_SET(qpc, qpc, rwe, 1);
	DEVX_SET(qpc, qpc, rae, 1);
	DEVX_SET(ads, ads, vhca_port_num, 1);
	DEVX_SET(ads, ads, pkey_index, 0);
	modify(s->qp, in, sizeof(in), "RST2INIT_QP");

	memset(in, 0, sizeof(in));
	DEVX_SET(modify_qp_in, in, opcode, OP_INIT2RTR_QP);
	DEVX_SET(modify_qp_in, in, qpn, s->qpn);
	DEVX_SET(qpc, qpc, mtu, MTU_1024);
	DEVX_SET(qpc, qpc, log_msg_max, 30);
	DEVX_SET(qpc, qpc, remote_qpn, remote_qpn);
	DEVX_SET(qpc, qpc, next_rcv_psn, PSN);
	DEVX_SET(qpc, qpc, min_rnr_nak, 12);
	DEVX_SET(qpc, qpc, log_rra_max, 0);
	DEVX_SET(ads, ads, vhca_port_num, 1);
	DEVX_SET(ads, ads, grh, 1);
	DEVX_SET(ads, ads, src_addr_index, 1);
	DEVX_SET(ads, ads, hop_limit, 64);
	DEVX_SET(ads, ads, udp_sport, 0xc000 | (s->qpn & 0x3fff));
	memcpy(DEVX_ADDR_OF(ads, ads, rgid_rip), gid->raw, 16);
	modify(s->qp, in, sizeof(in), "INIT2RTR_QP");

	memset(in, 0, sizeof(in));
	DEVX_SET(modify_qp_in, in, opcode, OP_RTR2RTS_QP);
	DEVX_SET(modify_qp_in, in, qpn, s->qpn);
	DEVX_SET(qpc, qpc, next_send_psn, PSN);
	DEVX_SET(qpc, qpc, retry_count, 7);
	DEVX_SET(qpc, qpc, rnr_retry, 7);
	DEVX_SET(qpc, qpc, log_sra_max, 0);
	DEVX_SET(ads, ads, ack_timeout, 14);
	modify(s->qp, in, sizeof(in), "RTR2RTS_QP");
}

/* Writes one send WQE (ctrl [+ raddr] + data) at the producer index and rings:
 * doorbell record first, then the UAR register (rdma-core's order and fences). */
static void devx_post_send(struct devx_side *s, uint8_t opcode, uint64_t laddr, uint32_t len, uint32_t lkey,
			   uint64_t raddr, uint32_t rkey)
{
	uint8_t *sq = s->wq + (1 << LOG_RQ) * RQ_STRIDE;
	uint8_t *wqe = sq + 64 * (s->sq_pi & ((1 << LOG_SQ) - 1));
	struct mlx5_wqe_ctrl_seg *ctrl = (void *)wqe;
	struct mlx5_wqe_data_seg *dseg = (void *)(wqe + 16);
	uint8_t ds = 2;
	if (opcode == MLX5_OPCODE_RDMA_WRITE) {
		struct mlx5_wqe_raddr_seg *r = (void *)(wqe + 16);
		r->raddr = htobe64(raddr);
		r->rkey = htobe32(rkey);
		r->reserved = 0;
		dseg = (void *)(wqe + 32);
		ds = 3;
	}
	mlx5dv_set_ctrl_seg(ctrl, s->sq_pi, opcode, 0, s->qpn, MLX5_WQE_CTRL_CQ_UPDATE, ds, 0, 0);
	mlx5dv_set_data_seg(dseg, len, lkey, laddr);
	s->sq_pi++;
	__atomic_thread_fence(__ATOMIC_RELEASE); /* WQE before the counter that covers it */
	s->qp_dbr[MLX5_SND_DBR] = htobe32(s->sq_pi);
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* the record before the register write */
	*(volatile uint64_t *)s->uar->reg_addr = *(uint64_t *)ctrl;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static void devx_post_recv(struct devx_side *s, uint64_t addr, uint32_t len, uint32_t lkey)
{
	struct mlx5_wqe_data_seg *d = (void *)(s->wq + RQ_STRIDE * (s->rq_head & ((1 << LOG_RQ) - 1)));
	mlx5dv_set_data_seg(d, len, lkey, addr);
	s->rq_head++;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	s->qp_dbr[MLX5_RCV_DBR] = htobe32(s->rq_head & 0xffff);
}

/* Polls our CQ for one CQE (software owns it when the opcode is valid and the owner
 * bit matches the lap); 0 on timeout. */
static struct mlx5_cqe64 *devx_poll(struct devx_side *s, struct mlx5_cqe64 *copy)
{
	uint32_t n = 1 << LOG_CQ;
	for (long spin = 0; spin < 200000000L; spin++) {
		struct mlx5_cqe64 *c = (void *)(s->cq_buf + 64 * (s->ci & (n - 1)));
		uint8_t op_own = __atomic_load_n(&c->op_own, __ATOMIC_ACQUIRE);
		if ((op_own >> 4) != MLX5_CQE_INVALID && (op_own & MLX5_CQE_OWNER_MASK) == !!(s->ci & n)) {
			*copy = *c;
			s->ci++;
			s->cq_dbr[0] /* consumer index word */ = htobe32(s->ci & 0xffffff);
			return copy;
		}
		if (spin > 1000)
			sched_yield();
	}
	return NULL;
}

static int verbs_wait(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (long spin = 0; spin < 200000000L; spin++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
		if (spin > 1000)
			sched_yield();
	}
	return 0;
}

int main(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n), *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), "softhca0") == 0)
			dev = list[i];
	if (!dev) {
		errno = ENODEV;
		die("no softhca0 (run under libdoorbell_preload.so)");
	}
	check("mlx5dv_is_supported", mlx5dv_is_supported(dev), "not an mlx5 device");
	struct mlx5dv_context_attr cattr = { .flags = MLX5DV_CONTEXT_FLAGS_DEVX };
	struct ibv_context *ctx = mlx5dv_open_device(dev, &cattr);
	if (!ctx)
		die("mlx5dv_open_device(DEVX)");
	check("open_devx", 1, "");

	/* QUERY_HCA_CAP, general page, maxima. */
	uint32_t cin[DEVX_ST_SZ_DW(query_hca_cap_in)] = {0};
	uint32_t cout[DEVX_ST_SZ_DW(query_hca_cap_out)] = {0};
	DEVX_SET(query_hca_cap_in, cin, opcode, OP_QUERY_HCA_CAP);
	DEVX_SET(query_hca_cap_in, cin, op_mod, 0);
	int r = mlx5dv_devx_general_cmd(ctx, cin, sizeof(cin), cout, sizeof(cout));
	struct ibv_device_attr da;
	if (ibv_query_device(ctx, &da))
		die("ibv_query_device");
	void *cap = DEVX_ADDR_OF(query_hca_cap_out, cout, capability);
	printf("INFO log_max_qp=%u log_max_cq_sz=%u max_qp=%d max_cqe=%d\n", DEVX_GET(cmd_hca_cap, cap, log_max_qp),
	       DEVX_GET(cmd_hca_cap, cap, log_max_cq_sz), da.max_qp, da.max_cqe);
	printf("INFO query_hca_cap: r=%d status=%#x syndrome=%#x\n", r, DEVX_GET(query_hca_cap_out, cout, status),
	       DEVX_GET(query_hca_cap_out, cout, syndrome));
	check("query_hca_cap", r == 0 && DEVX_GET(query_hca_cap_out, cout, status) == 0, "failed");
	check("caps_match_query_device",
	      (1ull << DEVX_GET(cmd_hca_cap, cap, log_max_qp)) >= (unsigned long long)da.max_qp &&
	      (1ull << DEVX_GET(cmd_hca_cap, cap, log_max_cq_sz)) >= (unsigned long long)da.max_cqe,
	      "log_max_qp/log_max_cq_sz below QUERY_DEVICE's max_qp/max_cqe");

	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	struct mlx5dv_pd dvpd;
	struct mlx5dv_obj obj = { .pd = { .in = pd, .out = &dvpd } };
	if (mlx5dv_init_obj(&obj, MLX5DV_OBJ_PD))
		die("mlx5dv_init_obj(PD)");

	struct devx_side s = {0};
	devx_create(ctx, dvpd.pdn, &s);
	check("devx_cq_qp_created", s.cqn != 0 || s.qpn != 0, "no numbers");

	/* The verbs end. */
	struct ibv_cq *vcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr qi = { .qp_type = IBV_QPT_RC, .send_cq = vcq, .recv_cq = vcq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1 } };
	struct ibv_qp *vqp = vcq ? ibv_create_qp(pd, &qi) : NULL;
	if (!vqp)
		die("ibv_create_qp");
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 1, &gid))
		die("ibv_query_gid 1");
	devx_connect(&s, vqp->qp_num, &gid);
	rc_to_rts(vqp, s.qpn, &gid);

	uint8_t *a = page_mem(4 * LEN), *b = page_mem(4 * LEN);
	struct ibv_mr *mra = ibv_reg_mr(pd, a, 4 * LEN, RC_ACCESS), *mrb = ibv_reg_mr(pd, b, 4 * LEN, RC_ACCESS);
	if (!mra || !mrb)
		die("ibv_reg_mr");
	struct mlx5_cqe64 cqe;
	struct ibv_wc wc;

	/* DevX SEND -> verbs RECV. */
	for (int i = 0; i < LEN; i++)
		a[i] = (uint8_t)(i * 7 + 1);
	struct ibv_sge sge = { .addr = (uintptr_t)b, .length = LEN, .lkey = mrb->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 }, *bad_r;
	if (ibv_post_recv(vqp, &rwr, &bad_r))
		die("ibv_post_recv");
	devx_post_send(&s, MLX5_OPCODE_SEND, (uintptr_t)a, LEN, mra->lkey, 0, 0);
	struct mlx5_cqe64 *c = devx_poll(&s, &cqe);
	check("devx_send_cqe", c && (c->op_own >> 4) == MLX5_CQE_REQ && be16toh(c->wqe_counter) == 0,
	      c ? "not a requester CQE for WQE 0" : "no CQE");
	int got = verbs_wait(vcq, &wc);
	check("verbs_recv", got && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == LEN,
	      got ? ibv_wc_status_str(wc.status) : "no completion");
	check("send_data", memcmp(a, b, LEN) == 0, "bytes differ");

	/* verbs SEND -> DevX RECV. */
	for (int i = 0; i < LEN; i++)
		b[LEN + i] = (uint8_t)(i * 13 + 5);
	devx_post_recv(&s, (uintptr_t)(a + LEN), LEN, mra->lkey);
	struct ibv_sge ssge = { .addr = (uintptr_t)(b + LEN), .length = LEN, .lkey = mrb->lkey };
	struct ibv_send_wr swr = { .wr_id = 2, .sg_list = &ssge, .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED }, *bad_s;
	if (ibv_post_send(vqp, &swr, &bad_s))
		die("ibv_post_send");
	c = devx_poll(&s, &cqe);
	check("devx_recv_cqe", c && (c->op_own >> 4) == MLX5_CQE_RESP_SEND && be32toh(c->byte_cnt) == LEN &&
	      (be32toh(c->sop_drop_qpn) & 0xffffff) == s.qpn, c ? "wrong CQE" : "no CQE");
	check("recv_data", memcmp(a + LEN, b + LEN, LEN) == 0, "bytes differ");
	got = verbs_wait(vcq, &wc);
	check("verbs_send", got && wc.status == IBV_WC_SUCCESS, got ? ibv_wc_status_str(wc.status) : "no completion");

	/* DevX RDMA WRITE -> verbs memory. */
	for (int i = 0; i < LEN; i++)
		a[2 * LEN + i] = (uint8_t)(i * 3 + 9);
	devx_post_send(&s, MLX5_OPCODE_RDMA_WRITE, (uintptr_t)(a + 2 * LEN), LEN, mra->lkey, (uintptr_t)(b + 2 * LEN),
		       mrb->rkey);
	c = devx_poll(&s, &cqe);
	check("devx_write_cqe", c && (c->op_own >> 4) == MLX5_CQE_REQ && be16toh(c->wqe_counter) == 1,
	      c ? "not a requester CQE for WQE 1" : "no CQE");
	check("write_data", memcmp(a + 2 * LEN, b + 2 * LEN, LEN) == 0, "bytes differ");

	/* QUERY_QP through DevX on the QP ibv_create_qp made. */
	uint32_t qin[DEVX_ST_SZ_DW(query_qp_in)] = {0};
	uint32_t qout[DEVX_ST_SZ_DW(query_qp_out)] = {0};
	DEVX_SET(query_qp_in, qin, opcode, OP_QUERY_QP);
	DEVX_SET(query_qp_in, qin, qpn, vqp->qp_num);
	r = mlx5dv_devx_qp_query(vqp, qin, sizeof(qin), qout, sizeof(qout));
	void *qpc = DEVX_ADDR_OF(query_qp_out, qout, qpc);
	printf("INFO verbs qp %#x: state %u remote_qpn %#x pd %#x\n", vqp->qp_num, DEVX_GET(qpc, qpc, state),
	       DEVX_GET(qpc, qpc, remote_qpn), DEVX_GET(qpc, qpc, pd));
	check("qp_query_verbs_qp", r == 0 && DEVX_GET(qpc, qpc, state) == QP_STATE_RTS &&
	      DEVX_GET(qpc, qpc, remote_qpn) == s.qpn && DEVX_GET(qpc, qpc, pd) == dvpd.pdn,
	      r ? strerror(errno) : "wrong context");

	/* The DevX QP queried through its own object. */
	memset(qout, 0, sizeof(qout));
	DEVX_SET(query_qp_in, qin, qpn, s.qpn);
	r = mlx5dv_devx_obj_query(s.qp, qin, sizeof(qin), qout, sizeof(qout));
	check("obj_query_devx_qp", r == 0 && DEVX_GET(qpc, qpc, state) == QP_STATE_RTS &&
	      DEVX_GET(qpc, qpc, remote_qpn) == vqp->qp_num, r ? strerror(errno) : "wrong context");

	/* The same query asynchronously: the answer arrives on the command completion fd
	 * with its wr_id. */
	struct mlx5dv_devx_cmd_comp *comp = mlx5dv_devx_create_cmd_comp(ctx);
	if (!comp)
		die("mlx5dv_devx_create_cmd_comp");
	r = mlx5dv_devx_obj_query_async(s.qp, qin, sizeof(qin), sizeof(qout), 0x1234, comp);
	struct {
		struct mlx5dv_devx_async_cmd_hdr hdr;
		uint32_t out[DEVX_ST_SZ_DW(query_qp_out)];
	} resp;
	memset(&resp, 0, sizeof(resp));
	int r2 = r ? -1 : mlx5dv_devx_get_async_cmd_comp(comp, &resp.hdr, sizeof(resp));
	void *aqpc = DEVX_ADDR_OF(query_qp_out, resp.out, qpc);
	check("obj_query_async", r == 0 && r2 == 0 && resp.hdr.wr_id == 0x1234 &&
	      DEVX_GET(query_qp_out, resp.out, status) == 0 && DEVX_GET(qpc, aqpc, state) == QP_STATE_RTS,
	      r ? strerror(errno) : "wrong answer");
	mlx5dv_devx_destroy_cmd_comp(comp);

	/* A UMEM the CQ uses cannot go; then everything is torn down in order. */
	r = mlx5dv_devx_umem_dereg(s.cq_umem);
	check("umem_busy", r == EBUSY, "dereg of an in-use UMEM did not fail with EBUSY");
	ibv_destroy_qp(vqp);
	ibv_destroy_cq(vcq);
	check("destroy_qp", mlx5dv_devx_obj_destroy(s.qp) == 0, "QP destroy failed");
	check("destroy_cq", mlx5dv_devx_obj_destroy(s.cq) == 0, "CQ destroy failed");
	if (r == EBUSY)
		check("umem_dereg", mlx5dv_devx_umem_dereg(s.cq_umem) == 0, "dereg failed");
	mlx5dv_devx_umem_dereg(s.cq_dbr_umem);
	mlx5dv_devx_umem_dereg(s.wq_umem);
	mlx5dv_devx_umem_dereg(s.qp_dbr_umem);
	mlx5dv_devx_free_uar(s.uar);
	ibv_dereg_mr(mra);
	ibv_dereg_mr(mrb);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("DONE failures=%d\n", failures);
	return failures ? 1 : 0;
}
