//! What the record says of the user-space driver's run (`environment.user_space_driver`): a leaf
//! the generic target part names, apart from taking the controller (`take.rs`).
use super::vfio::Iommu;
use crate::interfaces::memory::BufferMemory;
use serde::Serialize;

/// What the record says about the driver's run: the run's environment.
#[derive(Clone, Debug, Serialize)]
pub struct DriverEnv {
    pub controller: String,
    pub nsid: u32,
    /// "type1" (IO addresses through the IOMMU) or "no-iommu" (physical addresses).
    pub iommu: Iommu,
    pub iommu_group: String,
    /// Controller version (VS), CAP.MQES + 1, MDTS in bytes, I/O queue pairs granted.
    pub version: String,
    pub max_queue_entries: u32,
    pub max_transfer_bytes: Option<u64>,
    pub io_queues: u16,
    /// 2 MiB hugepages holding queues and PRP lists.
    pub hugepages: usize,
    /// Where the slot buffers are: "heap" (mapped through the IOMMU) or "hugepages" (physical
    /// addresses that stay put, without an IOMMU).
    pub buffers: BufferMemory,
}
