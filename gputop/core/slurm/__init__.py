"""Slurm, read and driven through its own commands (docs/slurm.md).

``detect`` says whether Slurm is here, ``commands`` runs its commands (argv lists, Slurm's
own error messages), ``queue`` reads ``squeue --json``, ``submit`` writes a batch script
and calls ``sbatch``, ``sync`` keeps the job store's Slurm jobs in step, ``cgroup`` ties a
process to its Slurm job and ``allocation`` explains an allocation's GPU numbering.
"""
