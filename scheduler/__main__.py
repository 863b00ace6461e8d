from portalq.scheduler.cli import main

main()
