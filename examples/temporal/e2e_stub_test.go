package agentflow_test

const envWorker = "CLINVOKE_TEMPORAL_WORKER"

func workerMain(addr string) int { return 2 }
