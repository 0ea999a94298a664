"""Operations: the operator commands' logic, the console, progress and metrics, the supervisor of worker processes, start checks and feeds."""
