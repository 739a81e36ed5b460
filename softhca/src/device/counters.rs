//! Per-instance device counters, like a ConnectX's port and QP error counters: what was
//! sent, received, dropped and retried. Read them with [`super::Device::counters`].

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
        /// Live counters (relaxed atomics, written by the engine thread; the per-packet
        /// ones only under the engine lock, through `step_add`).
        #[derive(Debug, Default)]
        pub struct Counters {
            $( $(#[$doc])* pub $name: AtomicU64, )*
        }

        /// A copy of the counters at one moment.
        #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
        pub struct Snapshot {
            $( $(#[$doc])* pub $name: u64, )*
        }

        impl Counters {
            /// Reads every counter.
            pub fn snapshot(&self) -> Snapshot {
                Snapshot { $( $name: self.$name.load(Ordering::Relaxed), )* }
            }
        }
    };
}

counters! {
    /// Packets handed to the socket (after fault injection; duplicates count twice).
    tx_packets,
    /// UDP payload bytes sent.
    tx_bytes,
    /// `sendmmsg` entries that carried them: a segmented run of packets (UDP GSO) is one.
    tx_datagrams,
    /// Packets the socket refused (sendmmsg errors other than would-block).
    tx_errors,
    /// Packets handed to a same-host peer's inbox instead of the socket (see
    /// [`super::link`]); they are not in `tx_packets`.
    local_tx_packets,
    /// Payload bytes of those packets that stayed in application memory for the peer to
    /// copy (one copy, `process_vm_readv`), and bytes that went inline in the record.
    local_tx_ref_bytes,
    local_tx_inline_bytes,
    /// Packets dropped because the peer's lane was full (the transport retransmits).
    local_tx_full,
    /// Runs of packets handed over as one record (burst records, see
    /// [`super::link::burst`]; their packets are in `local_tx_packets`), and bursts dropped
    /// because the peer had no same-host path by the flush (the transport resends them).
    local_bursts,
    local_burst_dropped,
    /// Zero-length datagrams sent to wake a sleeping same-host peer.
    local_wakes,
    /// Packets taken from this instance's inbox.
    local_rx_packets,
    /// Copy system calls made for them, and the bytes they moved.
    local_copies,
    local_copy_bytes,
    /// Copies that failed (the sender's memory gone, or the sender dead): those bytes were
    /// not placed.
    local_copy_errors,
    /// Datagrams received.
    rx_packets,
    /// Messages taken off the socket: a coalesced run of packets (UDP GRO) is one.
    rx_datagrams,
    /// UDP payload bytes received.
    rx_bytes,
    /// Received packets dropped for a bad ICRC.
    rx_bad_icrc,
    /// Received packets dropped as malformed (bad headers, truncated, bad opcode).
    rx_malformed,
    /// Received packets for a QP number that does not exist or is not receiving.
    rx_no_qp,
    /// Received packets from an address other than the QP's peer.
    rx_wrong_peer,
    /// UD packets whose Q_Key differs from the QP's.
    rx_bad_qkey,
    /// UD packets that found no receive WQE (dropped, as UD does).
    rx_no_recv,
    /// Ethernet port (raw packet QPs): frames sent, their bytes, and frames lost (no
    /// port, or the interface refused them).
    eth_tx_frames,
    eth_tx_bytes,
    eth_tx_dropped,
    /// Frames received on the port and their bytes (RoCEv2 to this instance included).
    eth_rx_frames,
    eth_rx_bytes,
    /// Frames steering placed nowhere (no table, or a miss at the end of the chain).
    eth_rx_unsteered,
    /// Frames a flow entry dropped.
    eth_rx_steer_dropped,
    /// Frames steered to a TIR whose RQ does not exist or is not ready.
    eth_rx_no_rq,
    /// Frames whose RQ had no receive WQE posted (dropped).
    eth_rx_no_recv,
    /// Packets dropped by fault injection.
    fault_dropped,
    /// Packets duplicated by fault injection.
    fault_duplicated,
    /// Packets reordered by fault injection.
    fault_reordered,
    /// Send doorbells seen (changes of a QP's SQ producer counter).
    sq_doorbells,
    /// Send WQEs fetched.
    wqes_fetched,
    /// Request packets sent again (go-back-N after a NAK or timeout, READ re-requests).
    retransmits,
    /// Local ACK timeouts that led to a retry.
    ack_timeouts,
    /// Tail probes: the last request packet sent again after a few silent round trips.
    tail_probes,
    /// Sequence-error NAKs sent (responder) and received (requester).
    seq_naks_sent,
    seq_naks_received,
    /// RNR NAKs sent (responder) and received (requester; each one is an RNR retry).
    rnr_naks_sent,
    rnr_naks_received,
    /// Other NAKs (invalid request, remote access, remote operational) sent / received.
    err_naks_sent,
    err_naks_received,
    /// ACKs sent by the responder.
    acks_sent,
    /// Duplicate requests received (answered again).
    duplicates_received,
    /// CQEs written (success and error).
    cqes,
    /// Error CQEs written (including flushes).
    error_cqes,
    /// CQEs not written because the CQ was full.
    cq_overruns,
    /// Completion events delivered to completion channels.
    comp_events,
    /// CQ arm commands taken from doorbell records (each arm store once), and those of
    /// them ignored as stale (the sequence number of an event already delivered).
    cq_arms,
    cq_arms_stale,
    /// UC packets dropped by the responder (a PSN gap, or a message it could not take:
    /// no receive WQE, a bad rkey, a continuation of a dropped message).
    uc_dropped,
    /// Bytes written into local memory by the responder (SEND, WRITE) or requester (READ
    /// responses, atomic results).
    dma_write_bytes,
    /// Bytes read from local memory to transmit.
    dma_read_bytes,
    /// Calls into peer memory ([`crate::peer::PeerMemory`], e.g. CUDA copies) and the
    /// bytes they moved: reads (payloads to transmit, READ responses to serve), writes
    /// (incoming payloads, READ responses and atomic results), atomics. The data path
    /// batches them per message or segment ([`super::stage`]): tests compare these with
    /// the packet counts.
    peer_reads,
    peer_read_bytes,
    peer_writes,
    peer_write_bytes,
    peer_atomics,
    /// Peer memory calls that failed (each completes its work request in error).
    peer_errors,
    /// Times the engine went to sleep in `ppoll` (idle backoff, or on the armed trap).
    sleeps,
    /// Times the engine write-protected its UAR pages to sleep on the doorbell trap.
    trap_arms,
    /// Application stores that hit a write-protected UAR page (doorbells after idleness).
    trap_faults,
    /// Application reads of the punched clock page (timer reads after idleness).
    trap_clock_faults,
    /// Reads of `/proc/self/maps` for expected mappings of device pages, and the mappings
    /// found there that the kernel half never saw (see `super::trap_scan`).
    trap_sweeps,
    trap_found,
    /// Yields in the grace period that kept the engine off the core for long (a thread
    /// that never yields shares it; the engine then stops polling for a while).
    yield_stalls,
    /// Engine steps that panicked (a softhca bug; the engine carries on).
    engine_panics,
    /// Steps run by an application thread in polled mode (`Device::progress`) that did
    /// something.
    progress_steps,
    /// The longest engine step, and the longest gap between the end of one step and the
    /// start of the next while work was pending (scheduling delay), in microseconds.
    step_max_us,
    gap_max_us,
}

/// Adds `n` to one of the per-packet counters with a plain load and store instead of a
/// locked read-modify-write.
///
/// Only for counters that are written under the engine lock alone (the traffic counters,
/// `dma_*_bytes`, `acks_sent`, `cqes`: all of them through the state the lock guards),
/// so their writers never overlap; readers still see whole values. Why: on x86 a locked
/// instruction waits until every earlier store has left the store buffer, and these run
/// several times per packet, right after its payload was copied into memory, which made
/// each packet wait for its copy's cache misses.
#[inline]
pub(crate) fn step_add(c: &AtomicU64, n: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}
