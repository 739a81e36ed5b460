/* flow_dv.c: mlx5dv raw flow steering on softhca0 through stock libmlx5 under
 * libdoorbell_preload.so: mlx5dv_create_flow_matcher + mlx5dv_create_flow, with DevX
 * flow counters and a DevX flow table, written as a DevX user writes them.
 *
 *   flow_dv counter PORT   a RAW_PACKET QP in RTR; a matcher on the outer ethertype,
 *                          IP protocol and UDP destination port (priority 0); a flow
 *                          for IPv4/UDP/PORT to the QP counting into a DevX flow
 *                          counter (ALLOC_FLOW_COUNTER); prints READY, a FRAME line per
 *                          completion (status, byte_len, payload hex) until a frame
 *                          ending in "end", then COUNTER <packets> <bytes>
 *                          (QUERY_FLOW_COUNTER).
 *   flow_dv drop PORT      a DevX NIC RX flow table (level 40) whose one entry drops
 *                          IPv4/UDP/PORT and counts into a DevX counter; a matcher flow
 *                          (priority 0) forwarding IPv4/UDP/PORT to that table; two
 *                          ibv_create_flow flows (priority 1) to the QP for PORT and
 *                          PORT+1; FRAME lines until "end" as above, then COUNTER of
 *                          the drop entry's counter.
 *
 * Expectations, from outside softhca: mlx5dv.h's matcher/flow/DevX API; the PRM
 * layouts below are the kernel's include/linux/mlx5/mlx5_ifc.h ones (only the structs
 * used, fields as named there); a counter counts the packets and bytes of the frames
 * its entry matched; a forward to a flow table hands the frame to that table.
 *
 * Build: cc flow_dv.c -libverbs -lmlx5
 */
#include <arpa/inet.h>
#include <endian.h>
#include <stdint.h>
#include <infiniband/mlx5dv.h>

#include "rc_pair.h"

typedef uint8_t u8;

struct mlx5_ifc_alloc_flow_counter_in_bits {
	u8 opcode[0x10];
	u8 uid[0x10];
	u8 reserved_at_20[0x10];
	u8 op_mod[0x10];
	u8 reserved_at_40[0x33];
	u8 flow_counter_bulk_log_size[0x5];
	u8 flow_counter_bulk[0x8];
};

struct mlx5_ifc_alloc_flow_counter_out_bits {
	u8 status[0x8];
	u8 reserved_at_8[0x18];
	u8 syndrome[0x20];
	u8 flow_counter_id[0x20];
	u8 reserved_at_60[0x20];
};

struct mlx5_ifc_query_flow_counter_in_bits {
	u8 opcode[0x10];
	u8 uid[0x10];
	u8 reserved_at_20[0x10];
	u8 op_mod[0x10];
	u8 reserved_at_40[0x20];
	u8 mkey[0x20];
	u8 address[0x40];
	u8 clear[0x1];
	u8 dump_to_memory[0x1];
	u8 num_of_counters[0x1e];
	u8 flow_counter_id[0x20];
};

struct mlx5_ifc_traffic_counter_bits {
	u8 packets[0x40];
	u8 octets[0x40];
};

struct mlx5_ifc_query_flow_counter_out_bits {
	u8 status[0x8];
	u8 reserved_at_8[0x18];
	u8 syndrome[0x20];
	u8 reserved_at_40[0x40];
};

struct mlx5_ifc_flow_table_context_bits {
	u8 reformat_en[0x1];
	u8 decap_en[0x1];
	u8 sw_owner[0x1];
	u8 termination_table[0x1];
	u8 table_miss_action[0x4];
	u8 level[0x8];
	u8 reserved_at_10[0x8];
	u8 log_size[0x8];
	u8 reserved_at_20[0x8];
	u8 table_miss_id[0x18];
	u8 reserved_at_40[0x8];
	u8 lag_master_next_table_id[0x18];
	u8 reserved_at_60[0x60];
	u8 sw_owner_icm_root_1[0x40];
	u8 sw_owner_icm_root_0[0x40];
};

struct mlx5_ifc_create_flow_table_in_bits {
	u8 opcode[0x10];
	u8 uid[0x10];
	u8 reserved_at_20[0x10];
	u8 op_mod[0x10];
	u8 other_vport[0x1];
	u8 reserved_at_41[0xf];
	u8 vport_number[0x10];
	u8 reserved_at_60[0x20];
	u8 table_type[0x8];
	u8 reserved_at_88[0x18];
	u8 reserved_at_a0[0x20];
	struct mlx5_ifc_flow_table_context_bits flow_table_context;
};

struct mlx5_ifc_create_flow_table_out_bits {
	u8 status[0x8];
	u8 icm_address_63_40[0x18];
	u8 syndrome[0x20];
	u8 icm_address_39_32[0x8];
	u8 table_id[0x18];
	u8 icm_address_31_0[0x20];
};

struct mlx5_ifc_fte_match_set_lyr_2_4_bits {
	u8 smac_47_16[0x20];
	u8 smac_15_0[0x10];
	u8 ethertype[0x10];
	u8 dmac_47_16[0x20];
	u8 dmac_15_0[0x10];
	u8 first_prio[0x3];
	u8 first_cfi[0x1];
	u8 first_vid[0xc];
	u8 ip_protocol[0x8];
	u8 ip_dscp[0x6];
	u8 ip_ecn[0x2];
	u8 cvlan_tag[0x1];
	u8 svlan_tag[0x1];
	u8 frag[0x1];
	u8 ip_version[0x4];
	u8 tcp_flags[0x9];
	u8 tcp_sport[0x10];
	u8 tcp_dport[0x10];
	u8 l4_type[0x2];
	u8 reserved_at_c2[0xe];
	u8 ipv4_ihl[0x4];
	u8 reserved_at_d4[0x4];
	u8 ttl_hoplimit[0x8];
	u8 udp_sport[0x10];
	u8 udp_dport[0x10];
	u8 src_ipv4_src_ipv6[0x80];
	u8 dst_ipv4_dst_ipv6[0x80];
};

struct mlx5_ifc_fte_match_param_bits {
	struct mlx5_ifc_fte_match_set_lyr_2_4_bits outer_headers;
	u8 misc_parameters[0x200];
	struct mlx5_ifc_fte_match_set_lyr_2_4_bits inner_headers;
	u8 misc_parameters_2[0x200];
	u8 misc_parameters_3[0x200];
	u8 misc_parameters_4[0x200];
	u8 misc_parameters_5[0x200];
	u8 reserved_at_e00[0x200];
};

struct mlx5_ifc_create_flow_group_in_bits {
	u8 opcode[0x10];
	u8 uid[0x10];
	u8 reserved_at_20[0x10];
	u8 op_mod[0x10];
	u8 other_vport[0x1];
	u8 reserved_at_41[0xf];
	u8 vport_number[0x10];
	u8 reserved_at_60[0x20];
	u8 table_type[0x8];
	u8 reserved_at_88[0x18];
	u8 reserved_at_a0[0x8];
	u8 table_id[0x18];
	u8 source_eswitch_owner_vhca_id_valid[0x1];
	u8 reserved_at_c1[0x1f];
	u8 start_flow_index[0x20];
	u8 reserved_at_100[0x20];
	u8 end_flow_index[0x20];
	u8 reserved_at_140[0x10];
	u8 match_definer_id[0x10];
	u8 reserved_at_160[0x80];
	u8 reserved_at_1e0[0x18];
	u8 match_criteria_enable[0x8];
	struct mlx5_ifc_fte_match_param_bits match_criteria;
	u8 reserved_at_1200[0xe00];
};

struct mlx5_ifc_create_flow_group_out_bits {
	u8 status[0x8];
	u8 reserved_at_8[0x18];
	u8 syndrome[0x20];
	u8 reserved_at_40[0x8];
	u8 group_id[0x18];
	u8 reserved_at_60[0x20];
};

struct mlx5_ifc_vlan_bits {
	u8 ethtype[0x10];
	u8 prio[0x3];
	u8 cfi[0x1];
	u8 vid[0xc];
};

struct mlx5_ifc_flow_context_bits {
	struct mlx5_ifc_vlan_bits push_vlan;
	u8 group_id[0x20];
	u8 reserved_at_40[0x8];
	u8 flow_tag[0x18];
	u8 reserved_at_60[0x10];
	u8 action[0x10];
	u8 extended_destination[0x1];
	u8 reserved_at_81[0x1];
	u8 flow_source[0x2];
	u8 reserved_at_84[0x4];
	u8 destination_list_size[0x18];
	u8 reserved_at_a0[0x8];
	u8 flow_counter_list_size[0x18];
	u8 packet_reformat_id[0x20];
	u8 modify_header_id[0x20];
	struct mlx5_ifc_vlan_bits push_vlan_2;
	u8 ipsec_obj_id[0x20];
	u8 reserved_at_140[0xc0];
	struct mlx5_ifc_fte_match_param_bits match_value;
	u8 reserved_at_1200[0x600];
};

struct mlx5_ifc_dest_format_bits {
	u8 destination_type[0x8];
	u8 destination_id[0x18];
	u8 reserved_at_20[0x1];
	u8 packet_reformat[0x1];
	u8 reserved_at_22[0x1e];
};

struct mlx5_ifc_flow_counter_list_bits {
	u8 flow_counter_id[0x20];
	u8 reserved_at_20[0x20];
};

struct mlx5_ifc_set_fte_in_bits {
	u8 opcode[0x10];
	u8 uid[0x10];
	u8 reserved_at_20[0x10];
	u8 op_mod[0x10];
	u8 other_vport[0x1];
	u8 reserved_at_41[0xf];
	u8 vport_number[0x10];
	u8 reserved_at_60[0x20];
	u8 table_type[0x8];
	u8 reserved_at_88[0x18];
	u8 reserved_at_a0[0x8];
	u8 table_id[0x18];
	u8 reserved_at_c0[0x18];
	u8 modify_enable_mask[0x8];
	u8 reserved_at_e0[0x20];
	u8 flow_index[0x20];
	u8 reserved_at_120[0xe0];
	struct mlx5_ifc_flow_context_bits flow_context;
};

struct mlx5_ifc_mbox_out_bits {
	u8 status[0x8];
	u8 reserved_at_8[0x18];
	u8 syndrome[0x20];
	u8 reserved_at_40[0x40];
};

enum {
	OP_ALLOC_FLOW_COUNTER = 0x939,
	OP_QUERY_FLOW_COUNTER = 0x93b,
	OP_CREATE_FLOW_TABLE = 0x930,
	OP_CREATE_FLOW_GROUP = 0x933,
	OP_SET_FLOW_TABLE_ENTRY = 0x936,
	ACTION_DROP = 0x2,
	ACTION_COUNT = 0x8,
	MATCH_OUTER = 1,
};

#define RECV_SLOTS 16
#define SLOT 2048

static struct ibv_context *ctx;
static struct ibv_pd *pd;

static void open_devx(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_device *dev = NULL;
	for (int i = 0; list && i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), "softhca0") == 0)
			dev = list[i];
	if (!dev) {
		errno = ENODEV;
		die("no softhca0 (run under libdoorbell_preload.so)");
	}
	struct mlx5dv_context_attr a = { .flags = MLX5DV_CONTEXT_FLAGS_DEVX };
	ctx = mlx5dv_open_device(dev, &a);
	if (!ctx)
		die("mlx5dv_open_device DEVX");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
}

/* IPv4 / UDP / dport in an outer header set (criteria when mask, else value). */
static void udp_match(void *outer, uint16_t port, int mask)
{
	DEVX_SET(fte_match_set_lyr_2_4, outer, ethertype, mask ? 0xffff : 0x0800);
	DEVX_SET(fte_match_set_lyr_2_4, outer, ip_protocol, mask ? 0xff : 17);
	DEVX_SET(fte_match_set_lyr_2_4, outer, udp_dport, mask ? 0xffff : port);
}

static struct mlx5dv_flow_match_parameters *params(uint16_t port, int mask)
{
	size_t sz = DEVX_ST_SZ_BYTES(fte_match_param);
	struct mlx5dv_flow_match_parameters *p = calloc(1, sizeof(*p) + sz);
	p->match_sz = sz;
	udp_match(DEVX_ADDR_OF(fte_match_param, p->match_buf, outer_headers), port, mask);
	return p;
}

static struct mlx5dv_devx_obj *counter(uint32_t *id)
{
	uint32_t in[DEVX_ST_SZ_DW(alloc_flow_counter_in)] = { 0 };
	uint32_t out[DEVX_ST_SZ_DW(alloc_flow_counter_out)] = { 0 };
	DEVX_SET(alloc_flow_counter_in, in, opcode, OP_ALLOC_FLOW_COUNTER);
	struct mlx5dv_devx_obj *o = mlx5dv_devx_obj_create(ctx, in, sizeof(in), out, sizeof(out));
	if (!o)
		die("ALLOC_FLOW_COUNTER");
	*id = DEVX_GET(alloc_flow_counter_out, out, flow_counter_id);
	return o;
}

static void print_counter(struct mlx5dv_devx_obj *o, uint32_t id)
{
	uint32_t in[DEVX_ST_SZ_DW(query_flow_counter_in)] = { 0 };
	uint32_t out[DEVX_ST_SZ_DW(query_flow_counter_out) + DEVX_ST_SZ_DW(traffic_counter)] = { 0 };
	DEVX_SET(query_flow_counter_in, in, opcode, OP_QUERY_FLOW_COUNTER);
	DEVX_SET(query_flow_counter_in, in, flow_counter_id, id);
	if (mlx5dv_devx_obj_query(o, in, sizeof(in), out, sizeof(out)))
		die("QUERY_FLOW_COUNTER");
	void *t = (uint8_t *)out + DEVX_ST_SZ_BYTES(query_flow_counter_out);
	printf("COUNTER %llu %llu\n", (unsigned long long)DEVX_GET64(traffic_counter, t, packets),
	       (unsigned long long)DEVX_GET64(traffic_counter, t, octets));
}

static struct ibv_qp *raw_rtr(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {
		.qp_type = IBV_QPT_RAW_PACKET, .send_cq = cq, .recv_cq = cq,
		.cap = { .max_send_wr = 1, .max_recv_wr = RECV_SLOTS, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
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

struct udp_flow {
	struct ibv_flow_attr attr;
	struct ibv_flow_spec_ipv4 ip;
	struct ibv_flow_spec_tcp_udp udp;
};

static struct ibv_flow *verbs_flow(struct ibv_qp *qp, uint16_t port, uint16_t prio)
{
	struct udp_flow f = {
		.attr = { .type = IBV_FLOW_ATTR_NORMAL, .size = sizeof(f), .priority = prio, .num_of_specs = 2, .port = 1 },
		.ip = { .type = IBV_FLOW_SPEC_IPV4, .size = sizeof(f.ip) },
		.udp = { .type = IBV_FLOW_SPEC_UDP, .size = sizeof(f.udp),
			 .val = { .dst_port = htons(port) }, .mask = { .dst_port = 0xffff } },
	};
	struct ibv_flow *fl = ibv_create_flow(qp, &f.attr);
	if (!fl)
		die("ibv_create_flow");
	return fl;
}

/* Posts receives, prints READY, prints FRAME lines until one ends in "end". */
static void receive(struct ibv_qp *qp, struct ibv_cq *cq)
{
	static uint8_t buf[RECV_SLOTS * SLOT];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	for (int i = 0; i < RECV_SLOTS; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)(buf + i * SLOT), .length = SLOT, .lkey = mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1 }, *bad;
		if (ibv_post_recv(qp, &wr, &bad))
			die("ibv_post_recv");
	}
	printf("READY\n");
	fflush(stdout);
	for (;;) {
		struct ibv_wc wc;
		/* The test's deadline ends a hang. */
		while (ibv_poll_cq(cq, 1, &wc) == 0)
			;
		uint8_t *b = buf + wc.wr_id * SLOT;
		printf("FRAME %s %u ", ibv_wc_status_str(wc.status), wc.byte_len);
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
	ibv_dereg_mr(mr);
}

static struct mlx5dv_flow_matcher *matcher(void)
{
	struct mlx5dv_flow_match_parameters *mask = params(0, 1);
	struct mlx5dv_flow_matcher_attr ma = {
		.type = IBV_FLOW_ATTR_NORMAL, .priority = 0, .match_criteria_enable = MATCH_OUTER, .match_mask = mask,
		.comp_mask = MLX5DV_FLOW_MATCHER_MASK_FT_TYPE, .ft_type = MLX5DV_FLOW_TABLE_TYPE_NIC_RX,
	};
	struct mlx5dv_flow_matcher *m = mlx5dv_create_flow_matcher(ctx, &ma);
	if (!m)
		die("mlx5dv_create_flow_matcher");
	free(mask);
	return m;
}

static int with_counter(struct ibv_cq *cq, uint16_t port)
{
	struct ibv_qp *qp = raw_rtr(cq);
	struct mlx5dv_flow_matcher *m = matcher();
	uint32_t cid;
	struct mlx5dv_devx_obj *c = counter(&cid);
	struct mlx5dv_flow_match_parameters *val = params(port, 0);
	struct mlx5dv_flow_action_attr acts[2] = {
		{ .type = MLX5DV_FLOW_ACTION_DEST_IBV_QP, .qp = qp },
		{ .type = MLX5DV_FLOW_ACTION_COUNTERS_DEVX, .obj = c },
	};
	struct ibv_flow *f = mlx5dv_create_flow(m, val, 2, acts);
	if (!f)
		die("mlx5dv_create_flow");
	int r = mlx5dv_destroy_flow_matcher(m);
	check("matcher_busy", r == EBUSY, r ? strerror(r) : "destroyed");
	receive(qp, cq);
	print_counter(c, cid);
	r = ibv_destroy_flow(f);
	check("destroy_flow", r == 0, strerror(r));
	check("destroy_matcher", mlx5dv_destroy_flow_matcher(m) == 0, strerror(errno));
	check("destroy_counter", mlx5dv_devx_obj_destroy(c) == 0, strerror(errno));
	check("destroy_qp", ibv_destroy_qp(qp) == 0, strerror(errno));
	free(val);
	return failures ? 1 : 0;
}

static int with_drop_table(struct ibv_cq *cq, uint16_t port)
{
	struct ibv_qp *qp = raw_rtr(cq);
	uint32_t cid;
	struct mlx5dv_devx_obj *c = counter(&cid);
	/* The DevX table, its group (the UDP port's mask) and the drop entry. */
	uint32_t tin[DEVX_ST_SZ_DW(create_flow_table_in)] = { 0 }, tout[DEVX_ST_SZ_DW(create_flow_table_out)] = { 0 };
	DEVX_SET(create_flow_table_in, tin, opcode, OP_CREATE_FLOW_TABLE);
	DEVX_SET(create_flow_table_in, tin, table_type, 0);
	DEVX_SET(create_flow_table_in, tin, flow_table_context.level, 40);
	DEVX_SET(create_flow_table_in, tin, flow_table_context.log_size, 1);
	struct mlx5dv_devx_obj *t = mlx5dv_devx_obj_create(ctx, tin, sizeof(tin), tout, sizeof(tout));
	if (!t)
		die("CREATE_FLOW_TABLE");
	uint32_t tid = DEVX_GET(create_flow_table_out, tout, table_id);
	uint32_t gin[DEVX_ST_SZ_DW(create_flow_group_in)] = { 0 }, gout[DEVX_ST_SZ_DW(create_flow_group_out)] = { 0 };
	DEVX_SET(create_flow_group_in, gin, opcode, OP_CREATE_FLOW_GROUP);
	DEVX_SET(create_flow_group_in, gin, table_id, tid);
	DEVX_SET(create_flow_group_in, gin, start_flow_index, 0);
	DEVX_SET(create_flow_group_in, gin, end_flow_index, 0);
	DEVX_SET(create_flow_group_in, gin, match_criteria_enable, MATCH_OUTER);
	udp_match(DEVX_ADDR_OF(create_flow_group_in, gin, match_criteria.outer_headers), 0, 1);
	struct mlx5dv_devx_obj *g = mlx5dv_devx_obj_create(ctx, gin, sizeof(gin), gout, sizeof(gout));
	if (!g)
		die("CREATE_FLOW_GROUP");
	uint32_t fin[DEVX_ST_SZ_DW(set_fte_in) + DEVX_ST_SZ_DW(flow_counter_list)] = { 0 };
	uint32_t fout[DEVX_ST_SZ_DW(mbox_out)] = { 0 };
	DEVX_SET(set_fte_in, fin, opcode, OP_SET_FLOW_TABLE_ENTRY);
	DEVX_SET(set_fte_in, fin, table_id, tid);
	DEVX_SET(set_fte_in, fin, flow_index, 0);
	DEVX_SET(set_fte_in, fin, flow_context.group_id, DEVX_GET(create_flow_group_out, gout, group_id));
	DEVX_SET(set_fte_in, fin, flow_context.action, ACTION_DROP | ACTION_COUNT);
	DEVX_SET(set_fte_in, fin, flow_context.flow_counter_list_size, 1);
	udp_match(DEVX_ADDR_OF(set_fte_in, fin, flow_context.match_value.outer_headers), port, 0);
	void *cl = (uint8_t *)fin + DEVX_ST_SZ_BYTES(set_fte_in);
	DEVX_SET(flow_counter_list, cl, flow_counter_id, cid);
	struct mlx5dv_devx_obj *e = mlx5dv_devx_obj_create(ctx, fin, sizeof(fin), fout, sizeof(fout));
	if (!e)
		die("SET_FLOW_TABLE_ENTRY");
	/* The QP would get both ports at priority 1; the matcher's priority 0 sends PORT to the table. */
	struct ibv_flow *v1 = verbs_flow(qp, port, 1), *v2 = verbs_flow(qp, port + 1, 1);
	struct mlx5dv_flow_matcher *m = matcher();
	struct mlx5dv_flow_match_parameters *val = params(port, 0);
	struct mlx5dv_flow_action_attr act = { .type = MLX5DV_FLOW_ACTION_DEST_DEVX, .obj = t };
	struct ibv_flow *f = mlx5dv_create_flow(m, val, 1, &act);
	if (!f)
		die("mlx5dv_create_flow to the DevX table");
	receive(qp, cq);
	print_counter(c, cid);
	check("destroy_flow", ibv_destroy_flow(f) == 0, strerror(errno));
	check("destroy_verbs_flows", ibv_destroy_flow(v1) == 0 && ibv_destroy_flow(v2) == 0, strerror(errno));
	check("destroy_matcher", mlx5dv_destroy_flow_matcher(m) == 0, strerror(errno));
	check("destroy_devx", mlx5dv_devx_obj_destroy(e) == 0 && mlx5dv_devx_obj_destroy(g) == 0
	      && mlx5dv_devx_obj_destroy(t) == 0 && mlx5dv_devx_obj_destroy(c) == 0, strerror(errno));
	check("destroy_qp", ibv_destroy_qp(qp) == 0, strerror(errno));
	free(val);
	return failures ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: flow_dv counter|drop PORT\n");
		return 2;
	}
	open_devx();
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!cq)
		die("ibv_create_cq");
	uint16_t port = (uint16_t)atoi(argv[2]);
	if (strcmp(argv[1], "counter") == 0)
		return with_counter(cq, port);
	if (strcmp(argv[1], "drop") == 0)
		return with_drop_table(cq, port);
	return 2;
}
