"""The IRS's Apply for EIN application: the ``obtain_ein`` flow, what its pages mean, and its
stand-in."""
