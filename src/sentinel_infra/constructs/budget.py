"""A monthly cost budget that warns on actual spend (80%, 100%) and on forecast spend (100%)."""

import aws_cdk as cdk
from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_sns as sns
from constructs import Construct

# (notification type, percent of the limit): the forecast warns while there is still time to act.
NOTIFICATIONS = (("ACTUAL", 80), ("ACTUAL", 100), ("FORECASTED", 100))


class CostBudget(Construct):
    """AWS Budgets tracks the whole account's cost: give Sentinel its own account (the AWS-recommended
    shape), or read the figure as an upper bound."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        stage: str,
        monthly_limit_usd: int,
        topic: sns.ITopic,
        email: str,
    ) -> None:
        super().__init__(scope, construct_id)
        subscribers = [budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=topic.topic_arn)]
        if email:
            subscribers.append(budgets.CfnBudget.SubscriberProperty(subscription_type="EMAIL", address=email))
        self.budget = budgets.CfnBudget(
            self,
            "Monthly",
            budget=budgets.CfnBudget.BudgetDataProperty(
                # Budget names are unique per account, not per region: the same stage deployed in a second
                # region must not collide with the first.
                budget_name=f"sentinel-{stage}-{cdk.Aws.REGION}-monthly",
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=monthly_limit_usd, unit="USD"),
            ),
            notifications_with_subscribers=[
                budgets.CfnBudget.NotificationWithSubscribersProperty(
                    notification=budgets.CfnBudget.NotificationProperty(
                        notification_type=kind,
                        comparison_operator="GREATER_THAN",
                        threshold=percent,
                        threshold_type="PERCENTAGE",
                    ),
                    subscribers=subscribers,
                )
                for kind, percent in NOTIFICATIONS
            ],
        )
