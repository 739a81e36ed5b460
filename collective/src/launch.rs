//! Reading what a launcher put in the environment.
//!
//! * **torchrun** (and `doorbell launch`): `RANK`, `WORLD_SIZE`, `LOCAL_RANK`,
//!   `MASTER_ADDR`, `MASTER_PORT` (and `LOCAL_WORLD_SIZE`).
//! * **Open MPI** (`mpirun`): `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`,
//!   `OMPI_COMM_WORLD_LOCAL_RANK` (and `_LOCAL_SIZE`). mpirun does not set
//!   `MASTER_ADDR`/`MASTER_PORT`; when they are absent:
//!   - the address defaults to `127.0.0.1` (every rank on this machine; for several
//!     machines export `MASTER_ADDR` with `mpirun -x MASTER_ADDR=host0`);
//!   - the port is `DOORBELL_MASTER_PORT` if set, else derived from the job id Open
//!     MPI gives every rank of one job (`OMPI_MCA_ess_base_jobid`, else
//!     `PMIX_NAMESPACE`) as `20000 + hash(jobid) % 20000`, so concurrent jobs do not
//!     collide, else [`DEFAULT_MASTER_PORT`] (29500, torchrun's default).
//!
//! torchrun's variables win when both sets are present.

use crate::error::{Error, Result};

/// The port used when nothing else decides (torchrun's default).
pub const DEFAULT_MASTER_PORT: u16 = 29500;
/// The address used when `MASTER_ADDR` is absent.
pub const DEFAULT_MASTER_ADDR: &str = "127.0.0.1";

/// Which launcher's variables were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    /// `RANK`/`WORLD_SIZE` (torchrun, `doorbell launch`).
    Torchrun,
    /// `OMPI_COMM_WORLD_*` (Open MPI's mpirun).
    OpenMpi,
}

/// A rank's place in the job, as the launcher described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchEnv {
    pub launcher: Launcher,
    pub rank: usize,
    pub world_size: usize,
    pub local_rank: usize,
    /// Ranks on this node, when the launcher says.
    pub local_world_size: Option<usize>,
    pub master_addr: String,
    pub master_port: u16,
}

impl LaunchEnv {
    /// Reads the process environment; `Ok(None)` when no launcher variables are set.
    pub fn from_env() -> Result<Option<LaunchEnv>> {
        LaunchEnv::from_vars(|k| std::env::var(k).ok())
    }

    /// Reads variables through `get` (testable without touching the environment).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Option<LaunchEnv>> {
        let num = |k: &str| -> Result<Option<usize>> {
            match get(k) {
                None => Ok(None),
                Some(v) => v.trim().parse::<usize>().map(Some).map_err(|_| Error::Invalid(format!("{k}={v:?} is not a number"))),
            }
        };
        let (launcher, rank, size, local, local_size) = if let Some(rank) = num("RANK")? {
            let size = num("WORLD_SIZE")?.ok_or_else(|| Error::Invalid("RANK is set but WORLD_SIZE is not".into()))?;
            (Launcher::Torchrun, rank, size, num("LOCAL_RANK")?, num("LOCAL_WORLD_SIZE")?)
        } else if let Some(rank) = num("OMPI_COMM_WORLD_RANK")? {
            let size = num("OMPI_COMM_WORLD_SIZE")?
                .ok_or_else(|| Error::Invalid("OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not".into()))?;
            (Launcher::OpenMpi, rank, size, num("OMPI_COMM_WORLD_LOCAL_RANK")?, num("OMPI_COMM_WORLD_LOCAL_SIZE")?)
        } else {
            return Ok(None);
        };
        if size == 0 || rank >= size {
            return Err(Error::Invalid(format!("rank {rank} outside a world of {size}")));
        }
        let master_addr = get("MASTER_ADDR").filter(|s| !s.is_empty()).unwrap_or_else(|| DEFAULT_MASTER_ADDR.to_string());
        let port_var = |k: &str| -> Result<Option<u16>> {
            match get(k).filter(|s| !s.is_empty()) {
                None => Ok(None),
                Some(v) => v.trim().parse::<u16>().map(Some).map_err(|_| Error::Invalid(format!("{k}={v:?} is not a port"))),
            }
        };
        let master_port = match port_var("MASTER_PORT")? {
            Some(p) => p,
            None => match port_var("DOORBELL_MASTER_PORT")? {
                Some(p) => p,
                None => get("OMPI_MCA_ess_base_jobid").or_else(|| get("PMIX_NAMESPACE")).map(|j| port_from_job(&j)).unwrap_or(DEFAULT_MASTER_PORT),
            },
        };
        Ok(Some(LaunchEnv {
            launcher,
            rank,
            world_size: size,
            local_rank: local.unwrap_or(rank),
            local_world_size: local_size,
            master_addr,
            master_port,
        }))
    }
}

/// `20000 + fnv1a(job) % 20000`.
pub fn port_from_job(job: &str) -> u16 {
    let mut h: u32 = 0x811c_9dc5;
    for b in job.bytes() {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    20000 + (h % 20000) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(kv: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn torchrun() {
        let e = LaunchEnv::from_vars(env(&[("RANK", "3"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "1"), ("MASTER_ADDR", "10.0.0.1"), ("MASTER_PORT", "29501")]))
            .unwrap()
            .unwrap();
        assert_eq!((e.launcher, e.rank, e.world_size, e.local_rank), (Launcher::Torchrun, 3, 4, 1));
        assert_eq!((e.master_addr.as_str(), e.master_port), ("10.0.0.1", 29501));
    }

    #[test]
    fn open_mpi_defaults() {
        let e = LaunchEnv::from_vars(env(&[
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "2"),
            ("OMPI_MCA_ess_base_jobid", "397148161"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((e.launcher, e.rank, e.world_size, e.local_rank), (Launcher::OpenMpi, 2, 4, 2));
        assert_eq!(e.master_addr, "127.0.0.1");
        assert_eq!(e.master_port, port_from_job("397148161"));
        assert!((20000..40000).contains(&e.master_port));
        let e = LaunchEnv::from_vars(env(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "1"), ("DOORBELL_MASTER_PORT", "31000")]))
            .unwrap()
            .unwrap();
        assert_eq!(e.master_port, 31000);
        let e = LaunchEnv::from_vars(env(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "1")])).unwrap().unwrap();
        assert_eq!(e.master_port, DEFAULT_MASTER_PORT);
    }

    #[test]
    fn absent_and_broken() {
        assert_eq!(LaunchEnv::from_vars(env(&[])).unwrap(), None);
        assert!(LaunchEnv::from_vars(env(&[("RANK", "0")])).is_err());
        assert!(LaunchEnv::from_vars(env(&[("RANK", "4"), ("WORLD_SIZE", "4")])).is_err());
        assert!(LaunchEnv::from_vars(env(&[("RANK", "x"), ("WORLD_SIZE", "4")])).is_err());
    }
}
