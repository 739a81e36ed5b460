/*
 * Reference bytes for provider/tests/mlx5dv_golden.rs, produced by the inline
 * setters and getters of the installed <infiniband/mlx5dv.h> (and, when built with
 * -DHAVE_IBVERBS and linked with -libverbs, ibv_wc_status_str).
 *
 * Output: one record per line, whitespace-separated. Every record carries its own
 * inputs, so the Rust side rebuilds the same thing from the same numbers and
 * compares bytes. Numbers are hex with a 0x prefix; byte strings are bare hex.
 *
 *   const  <NAME> <value>
 *   size   <struct> <bytes>
 *   offset <struct.field> <bytes>
 *   ctrl   <pi> <opcode> <opmod> <qpn> <fm_ce_se> <ds> <signature> <imm> <bytes>
 *   ctrlx  (same, from the SSSE3 setter)
 *   data   <length> <lkey> <addr> <bytes>
 *   datax  (same, from the SSSE3 setter)
 *   dgram  <key> <dqp_dct> <ext> <stat_rate_sl> <fl_mlid> <rlid> <rmac> <tclass>
 *          <hop_limit> <grh_gid_fl> <rgid> <bytes>
 *   cqe    <bytes> <owner> <opcode> <se> <format> <qpn_field> <wqe_counter>
 *          <byte_cnt> <srqn_uidx> <imm_inval_pkey> <syndrome> <vendor_err_synd>
 *          <s_wqe_opcode_qpn>
 *   wqe    <kind> <wqe_cnt> <pi> <qpn> <fm_ce_se> <n> <len lkey addr>*n <ring bytes>
 *   status <n> <text>   (text runs to the end of the line)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <endian.h>
#include <infiniband/mlx5dv.h>

static void hex(const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i;

	putchar(' ');
	for (i = 0; i < n; i++)
		printf("%02x", b[i]);
}

#define CONST(x) printf("const %s 0x%llx\n", #x, (unsigned long long)(x))
#define SIZE(t) printf("size %s %zu\n", #t, sizeof(struct t))
#define OFF(t, f) printf("offset %s.%s %zu\n", #t, #f, offsetof(struct t, f))

static void consts(void)
{
	CONST(IBV_WC_SUCCESS);
	CONST(IBV_WC_LOC_LEN_ERR);
	CONST(IBV_WC_LOC_QP_OP_ERR);
	CONST(IBV_WC_LOC_EEC_OP_ERR);
	CONST(IBV_WC_LOC_PROT_ERR);
	CONST(IBV_WC_WR_FLUSH_ERR);
	CONST(IBV_WC_MW_BIND_ERR);
	CONST(IBV_WC_BAD_RESP_ERR);
	CONST(IBV_WC_LOC_ACCESS_ERR);
	CONST(IBV_WC_REM_INV_REQ_ERR);
	CONST(IBV_WC_REM_ACCESS_ERR);
	CONST(IBV_WC_REM_OP_ERR);
	CONST(IBV_WC_RETRY_EXC_ERR);
	CONST(IBV_WC_RNR_RETRY_EXC_ERR);
	CONST(IBV_WC_LOC_RDD_VIOL_ERR);
	CONST(IBV_WC_REM_INV_RD_REQ_ERR);
	CONST(IBV_WC_REM_ABORT_ERR);
	CONST(IBV_WC_INV_EECN_ERR);
	CONST(IBV_WC_INV_EEC_STATE_ERR);
	CONST(IBV_WC_FATAL_ERR);
	CONST(IBV_WC_RESP_TIMEOUT_ERR);
	CONST(IBV_WC_GENERAL_ERR);
	CONST(IBV_WC_TM_ERR);
	CONST(IBV_WC_TM_RNDV_INCOMPLETE);

	CONST(IBV_WC_SEND);
	CONST(IBV_WC_RDMA_WRITE);
	CONST(IBV_WC_RDMA_READ);
	CONST(IBV_WC_COMP_SWAP);
	CONST(IBV_WC_FETCH_ADD);
	CONST(IBV_WC_BIND_MW);
	CONST(IBV_WC_LOCAL_INV);
	CONST(IBV_WC_TSO);
	CONST(IBV_WC_RECV);
	CONST(IBV_WC_RECV_RDMA_WITH_IMM);

	CONST(IBV_WC_GRH);
	CONST(IBV_WC_WITH_IMM);
	CONST(IBV_WC_IP_CSUM_OK);
	CONST(IBV_WC_WITH_INV);
}

/* The segment and CQE layouts are prm's, checked against this header by
 * prm/tests/mlx5dv_layout.rs; the provider's own layout here is the scatter entry. */
static void layouts(void)
{
	SIZE(ibv_sge);
	OFF(ibv_sge, addr);
	OFF(ibv_sge, length);
	OFF(ibv_sge, lkey);
}

struct ctrl_in {
	uint16_t pi;
	uint8_t opcode, opmod;
	uint32_t qpn;
	uint8_t fm_ce_se, ds, signature;
	uint32_t imm;
};

static const struct ctrl_in ctrl_table[] = {
	{ 0x1234, MLX5_OPCODE_RDMA_WRITE, 0, 0xabcdef, MLX5_WQE_CTRL_CQ_UPDATE, 3, 0, 0 },
	{ 0, MLX5_OPCODE_NOP, 0, 0, 0, 1, 0, 0 },
	{ 0xffff, MLX5_OPCODE_SEND, 0, 0xffffff, MLX5_WQE_CTRL_CQ_UPDATE, 63, 0, 0 },
	{ 0xffff, MLX5_OPCODE_SEND_IMM, 0xff, 0xffffff,
	  MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED | MLX5_WQE_CTRL_FENCE, 63, 0xff, 0xffffffff },
	{ 0x8000, MLX5_OPCODE_RDMA_WRITE_IMM, 0, 0x000001, MLX5_WQE_CTRL_SOLICITED, 12, 0, 0x12345678 },
	{ 0x0001, MLX5_OPCODE_SEND_INVAL, 0, 0x800000, MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE, 2, 0x5a, 0xdeadbeef },
	{ 0xfffe, MLX5_OPCODE_RDMA_READ, 0, 0x123456, MLX5_WQE_CTRL_CQ_UPDATE, 7, 0, 0 },
	{ 0x00ff, MLX5_OPCODE_ATOMIC_CS, 0, 0x0abcde, MLX5_WQE_CTRL_CQ_UPDATE, 4, 0, 0 },
	{ 0x0100, MLX5_OPCODE_ATOMIC_FA, 0x08, 0xfedcba, 0, 4, 0x01, 0x80000000 },
	{ 0x7fff, MLX5_OPCODE_UMR, 0x01, 0x000abc, MLX5_WQE_CTRL_CQ_UPDATE, 16, 0, 0x00000102 },
};

static void ctrl_segs(void)
{
	size_t i;

	for (i = 0; i < sizeof(ctrl_table) / sizeof(ctrl_table[0]); i++) {
		const struct ctrl_in *c = &ctrl_table[i];
		struct mlx5_wqe_ctrl_seg seg;

		/* libmlx5 clears bytes 8..12 (signature, stream id, flags) first. */
		memset(&seg, 0, sizeof(seg));
		/* The header's setter stores imm as given (already big-endian). */
		mlx5dv_set_ctrl_seg(&seg, c->pi, c->opcode, c->opmod, c->qpn, c->fm_ce_se,
				    c->ds, c->signature, htobe32(c->imm));
		printf("ctrl 0x%x 0x%x 0x%x 0x%x 0x%x 0x%x 0x%x 0x%x", c->pi, c->opcode,
		       c->opmod, c->qpn, c->fm_ce_se, c->ds, c->signature, c->imm);
		hex(&seg, sizeof(seg));
		putchar('\n');
#if defined(__SSSE3__)
		memset(&seg, 0xee, sizeof(seg));
		mlx5dv_x86_set_ctrl_seg(&seg, c->pi, c->opcode, c->opmod, c->qpn, c->fm_ce_se,
					c->ds, c->signature, htobe32(c->imm));
		printf("ctrlx 0x%x 0x%x 0x%x 0x%x 0x%x 0x%x 0x%x 0x%x", c->pi, c->opcode,
		       c->opmod, c->qpn, c->fm_ce_se, c->ds, c->signature, c->imm);
		hex(&seg, sizeof(seg));
		putchar('\n');
#endif
	}
}

struct data_in {
	uint32_t length, lkey;
	uint64_t addr;
};

static const struct data_in data_table[] = {
	{ 0, MLX5_INVALID_LKEY, 0 },
	{ 1, 0, 1 },
	{ 4096, 0x1234, 0x00007f0012345000ull },
	{ 0x80000000u, 0xffffffffu, 0xffffffffffffffffull },
	{ 0xffffffffu, 0x00abcdefu, 0x8000000000000000ull },
	{ 0x00010000u, 0xfffffeffu, 0x0123456789abcdefull },
};

static void data_segs(void)
{
	size_t i;

	for (i = 0; i < sizeof(data_table) / sizeof(data_table[0]); i++) {
		const struct data_in *d = &data_table[i];
		struct mlx5_wqe_data_seg seg;

		memset(&seg, 0xee, sizeof(seg));
		mlx5dv_set_data_seg(&seg, d->length, d->lkey, (uintptr_t)d->addr);
		printf("data 0x%x 0x%x 0x%llx", d->length, d->lkey, (unsigned long long)d->addr);
		hex(&seg, sizeof(seg));
		putchar('\n');
#if defined(__SSSE3__)
		memset(&seg, 0xee, sizeof(seg));
		mlx5dv_x86_set_data_seg(&seg, d->length, d->lkey, (uintptr_t)d->addr);
		printf("datax 0x%x 0x%x 0x%llx", d->length, d->lkey, (unsigned long long)d->addr);
		hex(&seg, sizeof(seg));
		putchar('\n');
#endif
	}
}

struct dgram_in {
	uint64_t key;
	uint32_t dqp_dct;
	uint8_t ext, stat_rate_sl, fl_mlid;
	uint16_t rlid;
	uint8_t rmac[6];
	uint8_t tclass, hop_limit;
	uint32_t grh_gid_fl;
	uint8_t rgid[16];
};

static const struct dgram_in dgram_table[] = {
	{ 0x1111111100000000ull, 0x000042, 1, 0x30, 0x00, 0xc000,
	  { 0x02, 0x00, 0x00, 0x00, 0x00, 0x02 }, 0x00, 64, 0x00300000,
	  { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2 } },
	{ 0xffffffffffffffffull, 0xffffff, 1, 0xff, 0xff, 0xffff,
	  { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff }, 0xff, 0xff, 0xffffffff,
	  { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff } },
	{ 0x0123456789abcdefull, 0x000001, 0, 0x01, 0x7f, 0x0001,
	  { 0xa0, 0xb1, 0xc2, 0xd3, 0xe4, 0xf5 }, 0x10, 1, 0x40abcdef,
	  { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55 } },
};

static void dgram_segs(void)
{
	size_t i;

	for (i = 0; i < sizeof(dgram_table) / sizeof(dgram_table[0]); i++) {
		const struct dgram_in *d = &dgram_table[i];
		struct mlx5_wqe_datagram_seg seg;
		uint8_t rmac[6], rgid[16];

		memcpy(rmac, d->rmac, 6);
		memcpy(rgid, d->rgid, 16);
		/* The setter leaves reserved0 alone; libmlx5's AH starts zeroed. */
		memset(&seg, 0, sizeof(seg));
		mlx5dv_set_dgram_seg(&seg, d->key, d->dqp_dct, d->ext, d->stat_rate_sl,
				     d->fl_mlid, d->rlid, rmac, d->tclass, d->hop_limit,
				     d->grh_gid_fl, rgid);
		printf("dgram 0x%llx 0x%x 0x%x 0x%x 0x%x 0x%x", (unsigned long long)d->key,
		       d->dqp_dct, d->ext, d->stat_rate_sl, d->fl_mlid, d->rlid);
		hex(d->rmac, 6);
		printf(" 0x%x 0x%x 0x%x", d->tclass, d->hop_limit, d->grh_gid_fl);
		hex(d->rgid, 16);
		hex(&seg, sizeof(seg));
		putchar('\n');
	}
}

/* CQEs: a fixed pseudo-random body with chosen op_own bytes, decoded by the getters. */
static void cqes(void)
{
	static const uint8_t op_owns[] = {
		0x00, 0x01, 0x02, 0x03, 0x0c, 0x0f, 0x10, 0x21, 0x32, 0x43, 0x44, 0x48,
		0x5d, 0xc0, 0xd0, 0xd1, 0xe0, 0xe1, 0xf0, 0xf1, 0xff, 0x7e, 0xa5,
	};
	static const uint8_t syndromes[] = { 0x01, 0x02, 0x04, 0x05, 0x06, 0x10, 0x11,
					     0x12, 0x13, 0x14, 0x15, 0x16, 0x22, 0x93 };
	uint32_t x = 0x2545f491;
	size_t i, j;

	for (i = 0; i < sizeof(op_owns); i++) {
		union {
			struct mlx5_cqe64 cqe;
			struct mlx5_err_cqe err;
			uint8_t b[64];
		} u;

		for (j = 0; j < 64; j++) {
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			u.b[j] = (uint8_t)x;
		}
		u.cqe.op_own = op_owns[i];
		u.err.syndrome = syndromes[i % sizeof(syndromes)];
		if (i == 1) {
			/* edge values */
			u.cqe.sop_drop_qpn = htobe32(0x0affffff);
			u.cqe.wqe_counter = htobe16(0xffff);
			u.cqe.byte_cnt = htobe32(0x80000000);
		}
		printf("cqe");
		hex(u.b, 64);
		printf(" 0x%x 0x%x 0x%x 0x%x", mlx5dv_get_cqe_owner(&u.cqe),
		       mlx5dv_get_cqe_opcode(&u.cqe), mlx5dv_get_cqe_se(&u.cqe),
		       mlx5dv_get_cqe_format(&u.cqe));
		printf(" 0x%x 0x%x 0x%x 0x%x 0x%x", be32toh(u.cqe.sop_drop_qpn),
		       be16toh(u.cqe.wqe_counter), be32toh(u.cqe.byte_cnt),
		       be32toh(u.cqe.srqn_uidx), be32toh(u.cqe.imm_inval_pkey));
		printf(" 0x%x 0x%x 0x%x\n", u.err.syndrome, u.err.vendor_err_synd,
		       be32toh(u.err.s_wqe_opcode_qpn));
	}
}

/*
 * Whole send WQEs composed from the header's setters the way libmlx5's post_send
 * lays them out: ctrl, [datagram], data segments, wrapping to the ring start when a
 * segment pointer reaches the end of the ring.
 */
struct wqe_in {
	const char *kind; /* "send" (RC) or "ud" */
	unsigned wqe_cnt;
	uint16_t pi;
	uint32_t qpn;
	uint8_t fm_ce_se;
	unsigned n;
	struct data_in sge[4];
};

static const struct wqe_in wqe_table[] = {
	{ "send", 4, 0x0003, 0x000123, MLX5_WQE_CTRL_CQ_UPDATE, 4,
	  { { 64, 0x11, 0x1000 }, { 128, 0x22, 0x2000 }, { 0xffffffff, 0xffffffff, 0xffffffffffffffffull }, { 1, 0x44, 0x4000 } } },
	{ "send", 4, 0xffff, 0xffffff, MLX5_WQE_CTRL_CQ_UPDATE | MLX5_WQE_CTRL_SOLICITED, 1,
	  { { 8, 0x1, 0x7ffff7a00000ull } } },
	{ "send", 8, 0x1236, 0x000001, 0, 3,
	  { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } } },
	{ "ud", 4, 0x0007, 0x000456, MLX5_WQE_CTRL_CQ_UPDATE, 2,
	  { { 256, 0x77, 0x10000 }, { 16, 0x88, 0xfffffffffffffff0ull } } },
	{ "ud", 2, 0x0000, 0x000456, 0, 1,
	  { { 1024, 0x99, 0x20000 } } },
};

static void wqes(void)
{
	size_t i;
	unsigned k;

	for (i = 0; i < sizeof(wqe_table) / sizeof(wqe_table[0]); i++) {
		const struct wqe_in *w = &wqe_table[i];
		uint8_t ring[8 * MLX5_SEND_WQE_BB];
		uint8_t *qend = ring + w->wqe_cnt * MLX5_SEND_WQE_BB;
		uint8_t *wqe = ring + (w->pi & (w->wqe_cnt - 1)) * MLX5_SEND_WQE_BB;
		uint8_t *seg = wqe + sizeof(struct mlx5_wqe_ctrl_seg);
		int ud = !strcmp(w->kind, "ud");
		uint8_t ds = 1 + (ud ? 3 : 0) + w->n;

		memset(ring, 0xee, sizeof(ring));
		memset(wqe + 8, 0, 4);
		mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)wqe, w->pi,
				    MLX5_OPCODE_SEND, 0, w->qpn, w->fm_ce_se, ds, 0, 0);
		if (ud) {
			static const uint8_t rmac[6] = { 0x02, 0, 0, 0, 0, 0x03 };
			static const uint8_t rgid[16] = { [10] = 0xff, [11] = 0xff, [12] = 127, [15] = 3 };

			memset(seg, 0, sizeof(struct mlx5_wqe_datagram_seg));
			mlx5dv_set_dgram_seg((struct mlx5_wqe_datagram_seg *)seg,
					     (uint64_t)0x11111111 << 32, 0x000789, 1,
					     0x20, 0, 0xc123, (uint8_t *)rmac, 0x08, 64,
					     0x00100000, (uint8_t *)rgid);
			seg += sizeof(struct mlx5_wqe_datagram_seg);
		}
		for (k = 0; k < w->n; k++) {
			if (seg == qend)
				seg = ring;
			mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)seg, w->sge[k].length,
					    w->sge[k].lkey, (uintptr_t)w->sge[k].addr);
			seg += sizeof(struct mlx5_wqe_data_seg);
		}
		printf("wqe %s %u 0x%x 0x%x 0x%x %u", w->kind, w->wqe_cnt, w->pi, w->qpn,
		       w->fm_ce_se, w->n);
		for (k = 0; k < w->n; k++)
			printf(" 0x%x 0x%x 0x%llx", w->sge[k].length, w->sge[k].lkey,
			       (unsigned long long)w->sge[k].addr);
		hex(ring, w->wqe_cnt * MLX5_SEND_WQE_BB);
		putchar('\n');
	}
}

#ifdef HAVE_IBVERBS
static void statuses(void)
{
	int s;

	for (s = IBV_WC_SUCCESS; s <= IBV_WC_TM_RNDV_INCOMPLETE; s++)
		printf("status %d %s\n", s, ibv_wc_status_str((enum ibv_wc_status)s));
}
#endif

int main(void)
{
	consts();
	layouts();
	ctrl_segs();
	data_segs();
	dgram_segs();
	cqes();
	wqes();
#ifdef HAVE_IBVERBS
	statuses();
#endif
	return 0;
}
