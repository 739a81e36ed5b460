/*
 * The outside oracle for the prm crate: the installed <infiniband/mlx5dv.h>.
 *
 * Prints, one record per line:
 *   size   <struct> <bytes>
 *   offset <struct>.<field> <bytes>
 *   const  <NAME> <value>
 *   devx   <label> <hex bytes>      DEVX_SET results on a test layout
 *   devxget <label> <value>         DEVX_GET results
 * tests/mlx5dv_layout.rs compares each with the Rust definitions.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <infiniband/mlx5dv.h>

#define SIZE(t) printf("size %s %zu\n", #t, sizeof(struct t))
#define OFF(t, f) printf("offset %s.%s %zu\n", #t, #f, offsetof(struct t, f))
#define CONST(x) printf("const %s 0x%llx\n", #x, (unsigned long long)(x))

/*
 * A test layout for the DEVX_* bit packing (not a PRM structure): fields of every
 * width at awkward places, as the PRM's structures have them. The Rust side defines
 * the same list with prm::layout!.
 */
typedef uint8_t u8;
struct mlx5_ifc_pack_test_bits {
	u8 a[0x1];
	u8 b[0x3];
	u8 c[0x4];
	u8 d[0x18];
	u8 p[0x20];
	u8 e[0x40];
	u8 f[0x5];
	u8 g[0xb];
	u8 h[0x10];
	u8 i[0x20];
	/* byte 25 holds three fields: sub-byte fields in a byte whose index is not a
	 * multiple of 8 (a bit position error of 16 bits per byte of offset wraps to
	 * nothing in a 128-bit shift only at multiples of 8) */
	u8 j[0x8];
	u8 k[0x3];
	u8 l[0x1];
	u8 m[0x4];
	u8 n[0x10];
};

static void hex(const char *label, const void *p, size_t n)
{
	const uint8_t *b = p;
	size_t i;

	printf("devx %s ", label);
	for (i = 0; i < n; i++)
		printf("%02x", b[i]);
	printf("\n");
}

int main(void)
{
	uint8_t buf[DEVX_ST_SZ_BYTES(pack_test)];

	SIZE(mlx5_wqe_ctrl_seg);
	OFF(mlx5_wqe_ctrl_seg, opmod_idx_opcode);
	OFF(mlx5_wqe_ctrl_seg, qpn_ds);
	OFF(mlx5_wqe_ctrl_seg, signature);
	OFF(mlx5_wqe_ctrl_seg, fm_ce_se);
	OFF(mlx5_wqe_ctrl_seg, imm);
	SIZE(mlx5_wqe_raddr_seg);
	OFF(mlx5_wqe_raddr_seg, raddr);
	OFF(mlx5_wqe_raddr_seg, rkey);
	OFF(mlx5_wqe_raddr_seg, reserved);
	SIZE(mlx5_wqe_atomic_seg);
	OFF(mlx5_wqe_atomic_seg, swap_add);
	OFF(mlx5_wqe_atomic_seg, compare);
	SIZE(mlx5_wqe_data_seg);
	OFF(mlx5_wqe_data_seg, byte_count);
	OFF(mlx5_wqe_data_seg, lkey);
	OFF(mlx5_wqe_data_seg, addr);
	SIZE(mlx5_wqe_inl_data_seg);
	SIZE(mlx5_wqe_datagram_seg);
	SIZE(mlx5_wqe_av);
	OFF(mlx5_wqe_av, key);
	OFF(mlx5_wqe_av, dqp_dct);
	OFF(mlx5_wqe_av, stat_rate_sl);
	OFF(mlx5_wqe_av, fl_mlid);
	OFF(mlx5_wqe_av, rlid);
	OFF(mlx5_wqe_av, rmac);
	OFF(mlx5_wqe_av, tclass);
	OFF(mlx5_wqe_av, hop_limit);
	OFF(mlx5_wqe_av, grh_gid_fl);
	OFF(mlx5_wqe_av, rgid);
	SIZE(mlx5_wqe_eth_seg);
	OFF(mlx5_wqe_eth_seg, cs_flags);
	OFF(mlx5_wqe_eth_seg, mss);
	OFF(mlx5_wqe_eth_seg, inline_hdr_sz);
	OFF(mlx5_wqe_eth_seg, inline_hdr_start);
	SIZE(mlx5_cqe64);
	OFF(mlx5_cqe64, wqe_id);
	OFF(mlx5_cqe64, ml_path);
	OFF(mlx5_cqe64, slid);
	OFF(mlx5_cqe64, flags_rqpn);
	OFF(mlx5_cqe64, hds_ip_ext);
	OFF(mlx5_cqe64, l4_hdr_type_etc);
	OFF(mlx5_cqe64, vlan_info);
	OFF(mlx5_cqe64, srqn_uidx);
	OFF(mlx5_cqe64, imm_inval_pkey);
	OFF(mlx5_cqe64, app);
	OFF(mlx5_cqe64, app_op);
	OFF(mlx5_cqe64, app_info);
	OFF(mlx5_cqe64, byte_cnt);
	OFF(mlx5_cqe64, timestamp);
	OFF(mlx5_cqe64, sop_drop_qpn);
	OFF(mlx5_cqe64, wqe_counter);
	OFF(mlx5_cqe64, signature);
	OFF(mlx5_cqe64, op_own);
	SIZE(mlx5_err_cqe);
	OFF(mlx5_err_cqe, srqn);
	OFF(mlx5_err_cqe, vendor_err_synd);
	OFF(mlx5_err_cqe, syndrome);
	OFF(mlx5_err_cqe, s_wqe_opcode_qpn);
	OFF(mlx5_err_cqe, wqe_counter);
	OFF(mlx5_err_cqe, signature);
	OFF(mlx5_err_cqe, op_own);

	CONST(MLX5_RCV_DBR);
	CONST(MLX5_SND_DBR);
	CONST(MLX5_CQ_DOORBELL);
	CONST(MLX5_CQ_DB_REQ_NOT_SOL);
	CONST(MLX5_CQ_DB_REQ_NOT);
	CONST(MLX5_SEND_WQE_BB);
	CONST(MLX5_SEND_WQE_SHIFT);
	CONST(MLX5_INLINE_SEG);
	CONST(MLX5_INVALID_LKEY);
	CONST(MLX5_EXTENDED_UD_AV);
	CONST(MLX5_ETH_WQE_L3_CSUM);
	CONST(MLX5_ETH_WQE_L4_CSUM);
	CONST(MLX5_CQE_OWNER_MASK);
	CONST(MLX5_OPCODE_NOP);
	CONST(MLX5_OPCODE_SEND_INVAL);
	CONST(MLX5_OPCODE_RDMA_WRITE);
	CONST(MLX5_OPCODE_RDMA_WRITE_IMM);
	CONST(MLX5_OPCODE_SEND);
	CONST(MLX5_OPCODE_SEND_IMM);
	CONST(MLX5_OPCODE_TSO);
	CONST(MLX5_OPCODE_RDMA_READ);
	CONST(MLX5_OPCODE_ATOMIC_CS);
	CONST(MLX5_OPCODE_ATOMIC_FA);
	CONST(MLX5_OPCODE_ATOMIC_MASKED_CS);
	CONST(MLX5_OPCODE_ATOMIC_MASKED_FA);
	CONST(MLX5_OPCODE_FMR);
	CONST(MLX5_OPCODE_LOCAL_INVAL);
	CONST(MLX5_OPCODE_CONFIG_CMD);
	CONST(MLX5_OPCODE_SET_PSV);
	CONST(MLX5_OPCODE_UMR);
	CONST(MLX5_OPCODE_TAG_MATCHING);
	CONST(MLX5_OPCODE_FLOW_TBL_ACCESS);
	CONST(MLX5_OPCODE_MMO);
	CONST(MLX5_CQE_REQ);
	CONST(MLX5_CQE_RESP_WR_IMM);
	CONST(MLX5_CQE_RESP_SEND);
	CONST(MLX5_CQE_RESP_SEND_IMM);
	CONST(MLX5_CQE_RESP_SEND_INV);
	CONST(MLX5_CQE_RESIZE_CQ);
	CONST(MLX5_CQE_NO_PACKET);
	CONST(MLX5_CQE_SIG_ERR);
	CONST(MLX5_CQE_REQ_ERR);
	CONST(MLX5_CQE_RESP_ERR);
	CONST(MLX5_CQE_INVALID);
	CONST(DEVX_ST_SZ_BYTES(pack_test));
	printf("const DEVX_BYTE_OFF.e %zu\n", (size_t)DEVX_BYTE_OFF(pack_test, e));
	printf("const DEVX_BYTE_OFF.i %zu\n", (size_t)DEVX_BYTE_OFF(pack_test, i));

	CONST(MLX5_INLINE_SCATTER_32);
	CONST(MLX5_INLINE_SCATTER_64);
	CONST(MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR);
	CONST(MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR);
	CONST(MLX5_CQE_SYNDROME_LOCAL_PROT_ERR);
	CONST(MLX5_CQE_SYNDROME_WR_FLUSH_ERR);
	CONST(MLX5_CQE_SYNDROME_MW_BIND_ERR);
	CONST(MLX5_CQE_SYNDROME_BAD_RESP_ERR);
	CONST(MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR);
	CONST(MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR);
	CONST(MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR);
	CONST(MLX5_CQE_SYNDROME_REMOTE_OP_ERR);
	CONST(MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR);
	CONST(MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR);
	CONST(MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR);
	CONST(MLX5_WQE_CTRL_CQ_UPDATE);
	CONST(MLX5_WQE_CTRL_SOLICITED);
	CONST(MLX5_WQE_CTRL_FENCE);
	CONST(MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE);
	/* segments as the header's setters write them, for prm's readers */
	{
		struct mlx5_wqe_ctrl_seg c;
		struct mlx5_wqe_datagram_seg d;
		struct mlx5_wqe_data_seg ds;
		uint8_t mac[6] = { 0x02, 0x11, 0x22, 0x33, 0x44, 0x55 };
		uint8_t gid[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55 };

		memset(&c, 0, sizeof(c));
		mlx5dv_set_ctrl_seg(&c, 0xbeef, MLX5_OPCODE_ATOMIC_CS, 0x08, 0x123456, 0x88, 5, 0x5a,
				    htobe32(0xdeadbeef));
		hex("ctrlseg", &c, sizeof(c));
		/* a GRH with source GID index 0x23 and flow label 0x45678, as libmlx5's
		 * mlx5_create_ah composes grh_gid_fl: flow_label | 1 << 30 | sgid_index << 20.
		 * The setter leaves the address vector's reserved bytes (16 to 19) as they
		 * were, so each segment starts zeroed: from the stack they were whatever the
		 * last call left there, and the comparison failed now and then. */
		memset(&d, 0, sizeof(d));
		mlx5dv_set_dgram_seg(&d, 0x1111222233334444ull, 0xabcdef, 1, 0x35, 0x80, 0x1234, mac,
				     0x60, 64, 0x45678 | 1u << 30 | 0x23u << 20, gid);
		hex("dgramseg1", &d, sizeof(d));
		/* bit 31 of dqp_dct given by the caller too: the setter ORs the extension in */
		memset(&d, 0, sizeof(d));
		mlx5dv_set_dgram_seg(&d, 0, 0x80000002, 1, 0, 0, 0, mac, 0, 0, 0, gid);
		hex("dgramseg2", &d, sizeof(d));
		/* no GRH, no extension */
		memset(&d, 0, sizeof(d));
		mlx5dv_set_dgram_seg(&d, 0, 3, 0, 0, 0, 0, mac, 0, 0, 0x1u << 20 | 0xfffff, gid);
		hex("dgramseg3", &d, sizeof(d));
		mlx5dv_set_data_seg(&ds, 0, MLX5_INVALID_LKEY, 0);
		hex("dataseg_end", &ds, sizeof(ds));
		mlx5dv_set_data_seg(&ds, 4096, 0x1234, 0x1122334455667788ull);
		hex("dataseg", &ds, sizeof(ds));
	}

	/* the header's own accessors of op_own, for every value of the byte */
	for (unsigned v = 0; v < 256; v++) {
		struct mlx5_cqe64 cqe;

		memset(&cqe, 0, sizeof(cqe));
		cqe.op_own = v;
		printf("cqebits %u %u,%u,%u,%u\n", v, mlx5dv_get_cqe_opcode(&cqe),
		       mlx5dv_get_cqe_owner(&cqe), mlx5dv_get_cqe_se(&cqe),
		       mlx5dv_get_cqe_format(&cqe));
	}

	memset(buf, 0, sizeof(buf));
	DEVX_SET(pack_test, buf, a, 1);
	DEVX_SET(pack_test, buf, b, 5);
	DEVX_SET(pack_test, buf, c, 0xf);
	DEVX_SET(pack_test, buf, d, 0x123456);
	DEVX_SET64(pack_test, buf, e, 0x0102030405060708ull);
	DEVX_SET(pack_test, buf, f, 0x1b);
	DEVX_SET(pack_test, buf, g, 0x5a5);
	DEVX_SET(pack_test, buf, h, 0xbeef);
	DEVX_SET(pack_test, buf, i, 0xcafef00d);
	hex("set_all", buf, sizeof(buf));
	/* values wider than the field are masked; neighbours are kept */
	DEVX_SET(pack_test, buf, b, 0xff);
	DEVX_SET(pack_test, buf, g, 0xffff);
	hex("masked", buf, sizeof(buf));
	printf("devxget c %u\n", DEVX_GET(pack_test, buf, c));
	printf("devxget g %u\n", DEVX_GET(pack_test, buf, g));
	printf("devxget d %u\n", DEVX_GET(pack_test, buf, d));

	memset(buf, 0xff, sizeof(buf));
	DEVX_SET(pack_test, buf, d, 0);
	DEVX_SET(pack_test, buf, f, 2);
	/* a flag set to 0, and fields whose neighbours in their byte hold ones */
	DEVX_SET(pack_test, buf, a, 0);
	DEVX_SET(pack_test, buf, k, 2);
	DEVX_SET(pack_test, buf, m, 5);
	hex("clear", buf, sizeof(buf));
	printf("devxget k %u\n", DEVX_GET(pack_test, buf, k));
	printf("devxget m %u\n", DEVX_GET(pack_test, buf, m));
	printf("devxget j %u\n", DEVX_GET(pack_test, buf, j));
	return 0;
}
