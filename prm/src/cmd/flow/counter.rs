//! ALLOC/DEALLOC/QUERY_FLOW_COUNTER: packet and byte counters an entry's COUNT
//! action adds to.

use crate::layout;

layout! {
    /// ALLOC_FLOW_COUNTER inbox. `flow_counter_bulk` asks for a bulk of
    /// 128 * bulk counters; softhca allocates single ones (bulk 0).
    pub struct AllocFlowCounterIn = alloc_flow_counter_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x33],
        flow_counter_bulk_log_size: 0x5,
        flow_counter_bulk: 0x8,
    }
}

layout! {
    /// ALLOC_FLOW_COUNTER outbox.
    pub struct AllocFlowCounterOut = alloc_flow_counter_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        flow_counter_id: 0x20,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DEALLOC_FLOW_COUNTER inbox.
    pub struct DeallocFlowCounterIn = dealloc_flow_counter_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        flow_counter_id: 0x20,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// QUERY_FLOW_COUNTER inbox: `num_of_counters` counters from
    /// `flow_counter_id` on (0 means one), optionally cleared after reading.
    pub struct QueryFlowCounterIn = query_flow_counter_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x20],
        mkey: 0x20,
        address: 0x40,
        clear: 0x1,
        dump_to_memory: 0x1,
        num_of_counters: 0x1e,
        flow_counter_id: 0x20,
    }
}

layout! {
    /// One counter's values (`traffic_counter`).
    pub struct TrafficCounter = traffic_counter {
        packets: 0x40,
        octets: 0x40,
    }
}

layout! {
    /// QUERY_FLOW_COUNTER outbox: the header; the [`TrafficCounter`]s follow.
    pub struct QueryFlowCounterOut = query_flow_counter_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
    }
}
